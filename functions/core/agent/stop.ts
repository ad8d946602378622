import type { Envelope } from "../../../schemas";
import { type OperatorStop, stopMessage } from "../model-guard";
import type { DiscardReason } from "../ports";
import type { Decision } from "../role";
import {
  type AgentDefinition,
  type AgentJournal,
  moved,
  type RunStop,
  type StartedBy,
} from "./agent";
import type { AgentPorts } from "./loop";
import { toolCallKey } from "./tool-call";

/**
 * A run whose turn no longer wants an answer stops before its next work (seed 000 §11.5), as the
 * sender drops the turn's sends: its turn was cancelled (the agent's cancel command, such as
 * `support.cancel.requested`), or superseded (`Superseded`: the customer wrote again, and a newer
 * turn answers).
 *
 * - A start command already superseded is discarded `superseded`: no run begins.
 * - A cancel of a turn whose run has not begun is kept as that run, CANCELLED, so a start that
 *   comes later is discarded `cancelled`.
 * - A cancel of a run BLOCKED on an approval ends it CANCELLED at once (the call never ran; the
 *   run is due no more). A run BLOCKED on outside work its call started (./task-wait.ts) is
 *   marked: its next poll settles the call first. Any other run is marked (`stop`) and ends CANCELLED at its next step or
 *   approval, which is recorded discarded with the reason; a superseded run is found so there.
 * - Every later command of a stopped run is discarded with its reason: an approval pays nothing.
 * - A run that has written (a write call took effect) is not stopped: it goes on to its answer,
 *   so what it did is reported. A step that settles a write call already claimed learns its
 *   outcome first.
 * - An operator's stop of the run or its tenant (`agentbus stop`, ../model-guard.ts) is stronger:
 *   the step whose model or tool call it refused ends the run CANCELLED (`operatorStopped`),
 *   written or not, since nothing more may start for it; the facts are those of a cancelled turn.
 */

/** True when the run's start command is out of date (the customer wrote again since). */
export type Superseded = (start: StartedBy) => Promise<boolean>;

const ENDED = ["COMPLETED", "FAILED", "CANCELLED", "DEGRADED"];

/** Why an event of the run is dropped unprocessed: the run stopped, or its start is superseded. */
export async function stopDiscard(
  state: AgentJournal | undefined,
  event: Envelope,
  startType: string,
  superseded: Superseded | undefined,
): Promise<DiscardReason | undefined> {
  if (state?.status === "CANCELLED" && state.stop) return state.stop.reason;
  if (state || event.event_type !== startType) return undefined;
  return (await superseded?.(event)) ? "superseded" : undefined;
}

/** A cancel of the run's turn (`fresh`: the run as it would be kept before its start). */
export function cancelTurn(
  state: AgentJournal | undefined,
  event: Envelope,
  fresh: () => AgentJournal,
  now: Date,
): Decision<AgentJournal> {
  const { requested_by } = event.payload as { requested_by: string };
  const stop: RunStop = { reason: "cancelled", at: now.toISOString(), by: requested_by };
  if (!state) return { state: stoppedJournal(fresh(), stop, now) };
  if (state.stop || ENDED.includes(state.status)) return {};
  // A run waiting for outside work its call started learns how it ended first (it may apply).
  if (state.status === "BLOCKED" && state.waiting?.kind !== "task" && !hasWritten(state))
    return { state: stoppedJournal(state, stop, now), dueAt: null };
  return { state: { ...state, stop }, dueAt: state.waiting?.deadline ?? null };
}

/** The run ended CANCELLED at this step or approval, or undefined: it goes on. */
export async function stopped(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
  superseded: Superseded | undefined,
  now: Date,
): Promise<Decision<AgentJournal> | undefined> {
  if (journal.status !== "RUNNING" && journal.status !== "BLOCKED") return undefined;
  if (hasWritten(journal)) return undefined;
  const reason =
    journal.stop?.reason ?? ((await superseded?.(journal.started_by)) ? "superseded" : undefined);
  if (reason === undefined || (await settlesClaimedWrite(agent, journal, ports))) return undefined;
  const stop = journal.stop ?? { reason, at: now.toISOString() };
  return { state: stoppedJournal(journal, stop, now), discarded: reason, dueAt: null };
}

function hasWritten(journal: AgentJournal): boolean {
  return (journal.totals.writes ?? 0) > 0;
}

/** The next step settles a write call claimed by an earlier attempt (it may have taken effect). */
async function settlesClaimedWrite(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
): Promise<boolean> {
  const call = journal.pending.find((p) => p.result === undefined);
  const tool = call && agent.tools.find((t) => t.name === call.name);
  if (!call || tool?.effect !== "write") return false;
  const key = toolCallKey(journal.task_id, journal.run_id, call);
  return (await ports.sideEffects.get(key)) !== undefined;
}

/** The run ended CANCELLED at this step: an operator stopped it or its tenant (`stop`). */
export function operatorStopped(
  journal: AgentJournal,
  stop: OperatorStop,
  now: Date,
): Decision<AgentJournal> {
  const runStop: RunStop = { reason: "cancelled", at: now.toISOString(), by: stop.by };
  const failure = { code: "operator.stopped", message: stopMessage(stop) };
  return {
    state: stoppedJournal(journal, runStop, now, failure),
    discarded: runStop.reason,
    dueAt: null,
  };
}

function stoppedJournal(
  journal: AgentJournal,
  stop: RunStop,
  now: Date,
  failure?: AgentJournal["failure"],
): AgentJournal {
  const { waiting: _waiting, ...rest } = journal;
  const message =
    stop.reason === "cancelled"
      ? `its turn was cancelled${stop.by ? ` by ${stop.by}` : ""}`
      : "its turn was superseded: a newer message is answered instead";
  return {
    ...rest,
    status: moved(journal, "TaskCancelled"),
    stop,
    failure: failure ?? { code: `agent.${stop.reason}`, message },
    updated_at: now.toISOString(),
  };
}
