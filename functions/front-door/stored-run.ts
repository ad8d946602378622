import { type AggregateRef, type Envelope, tenantOf } from "../../schemas";
import { MAX_STREAM_VERSION } from "../../schemas/envelope";
import type { EventStore } from "../core/ports";
import type { OrchestratorState } from "../roles/orchestrator/state";
import { DAG_RUN } from "./runs-in-flight";

/**
 * A run as the front door reads it for a caller, from the orchestrator's state item
 * `dag_run#<run id>`: not stored yet (its start is on its way), the run, or a start the
 * orchestrator refused. A refused start makes no run: the orchestrator leaves the state null and
 * puts `workflow.rejected` (request `start`) on the run's stream, saying why and, by its tenant,
 * whose start it was. Every door shows it as a run that ended refused: A2A's task `rejected`
 * (./a2a/task.ts), `GET /v1/runs/{id}` with status REJECTED and the refusal (./api.ts), and the
 * run's streams end at it (./stream.ts, ./agui-run.ts).
 *
 * Another tenant's run or refused start is not found, as one that does not exist; so is a null
 * state with no refused start on its stream (the orchestrator refused another request, a cancel
 * say, about a run that was never started: no run either).
 */

/**
 * Why the orchestrator refused a run's start (its `workflow.rejected`, request `start`): the
 * workflow refuses the input, names a role the stack has not, is not the tenant's to start.
 */
export interface StartRefusal {
  readonly code: string;
  readonly message: string;
}

/** The runs' streams (the events table), where a refused start says why and whose it was. */
export interface RunStreams {
  readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]>;
}

/** What a caller is shown of run `runId`; `revision` is its state item's. */
export type StoredRun =
  | { readonly kind: "unstored" }
  | { readonly kind: "not_found" }
  | { readonly kind: "run"; readonly revision: number; readonly state: OrchestratorState }
  | { readonly kind: "refused"; readonly revision: number; readonly refusal: StartRefusal };

/**
 * Run `runId` as `tenant` is shown it (see top). Without `streams` a refused start's refusal
 * cannot be read: it is shown refused with no reason (code `workflow.rejected`), whoever asks.
 */
export async function loadStoredRun(
  ports: { readonly store: Pick<EventStore, "load">; readonly streams?: RunStreams | undefined },
  runId: string,
  tenant: string,
): Promise<StoredRun> {
  const loaded = await ports.store.load({ state: { type: DAG_RUN, id: runId } });
  const stored = loaded.state;
  if (!stored) return { kind: "unstored" };
  const { revision } = stored;
  if (stored.data === null) {
    const refusal = await startRefusalOf(ports.streams, runId, tenant);
    return refusal ? { kind: "refused", revision, refusal } : { kind: "not_found" };
  }
  const state = stored.data as OrchestratorState;
  return tenantOf(state) === tenant ? { kind: "run", revision, state } : { kind: "not_found" };
}

/** Why `tenant`'s start of `runId` was refused; undefined when the stream holds no such refusal. */
async function startRefusalOf(
  streams: RunStreams | undefined,
  runId: string,
  tenant: string,
): Promise<StartRefusal | undefined> {
  if (!streams) return { code: "workflow.rejected", message: "" };
  const events = await streams.readStream({ type: DAG_RUN, id: runId }, 1, MAX_STREAM_VERSION);
  const rejected = events.find(
    (e) =>
      e.event_type === "workflow.rejected" &&
      (e.payload as { request?: unknown } | null)?.request === "start",
  );
  if (!rejected || tenantOf(rejected) !== tenant) return undefined;
  const why = rejected.payload as { code?: unknown; message?: unknown };
  return {
    code: typeof why.code === "string" ? why.code : "workflow.rejected",
    message: typeof why.message === "string" ? why.message : "",
  };
}
