import type { StateReader } from "../core/ports";
import type { OrchestratorState } from "../roles/orchestrator/state";

/**
 * A tenant's cap on workflow runs in flight at the front door. Each run the front door starts is
 * counted in its tenant's set of runs (RunsInFlight) when its start is accepted; a start that
 * would make more than the cap is refused (429) and writes nothing.
 *
 * Nothing takes a run out when it ends: the runs' own states say which have ended. Only when a
 * tenant's set is full are the states of its runs read (StateReader, one BatchGetItem), and the
 * runs that are no longer in flight leave the set before the start is tried once more:
 * - a run whose state says it ended (COMPLETED, PARTIAL, FAILED, CANCELLED), or whose start the
 *   orchestrator refused (its state is null);
 * - a run with no state `UNSTARTED_RUN_SECONDS` after its start was accepted: its start never
 *   reached the bus (the function stopped before putting it, or a client never retried a 503).
 * So the orchestrator and its commits are left as they are, a run the operator started (not
 * counted) is never taken out of a set, and taking a run out twice (two starts refused at once)
 * is the same as once.
 */

/** The aggregate type of a workflow run's state (the orchestrator's, `dag_run/<run_id>`). */
export const DAG_RUN = "dag_run";
export const DEFAULT_RUNS_IN_FLIGHT = 20;
/** What a start refused over the cap is told to wait, in seconds (a run takes minutes). */
export const RUN_RETRY_AFTER_SECONDS = 30;
/** How long a counted run may have no state before its start counts as lost. */
export const UNSTARTED_RUN_SECONDS = 3600;

/** A run counted against its tenant's cap: its id and when its start was accepted (ISO 8601). */
export interface CountedRun {
  readonly runId: string;
  readonly since: string;
}

/** A run counted, or refused with the runs counted. */
export type RunAdded = { readonly ok: true } | { readonly counted: readonly CountedRun[] };

/** Each tenant's set of counted runs. */
export interface RunsInFlight {
  /**
   * Count `run` for `tenant` unless `cap` runs are counted already (a run counted already stays
   * counted); when refused, the runs counted.
   */
  add(tenant: string, run: CountedRun, cap: number): Promise<RunAdded>;
  /** Stop counting `runs` for `tenant` (a run not counted is left alone). */
  remove(tenant: string, runs: readonly CountedRun[]): Promise<void>;
}

/**
 * Count `run` for `tenant` under `cap`; when the tenant's set is full, first take out the runs
 * no longer in flight (see top). Refused: the seconds to wait.
 */
export async function admitRun(
  ports: { readonly runs: RunsInFlight; readonly states: StateReader },
  tenant: string,
  run: CountedRun,
  cap: number,
  now: Date,
): Promise<{ readonly ok: true } | { readonly retryAfterSeconds: number }> {
  const first = await ports.runs.add(tenant, run, cap);
  if ("ok" in first) return first;
  const over = await runsNotInFlight(ports.states, first.counted, now);
  if (over.length === 0) return { retryAfterSeconds: RUN_RETRY_AFTER_SECONDS };
  await ports.runs.remove(tenant, over);
  const second = await ports.runs.add(tenant, run, cap);
  return "ok" in second ? second : { retryAfterSeconds: RUN_RETRY_AFTER_SECONDS };
}

/** The counted runs that have ended, were refused, or whose start was lost. */
async function runsNotInFlight(
  states: StateReader,
  counted: readonly CountedRun[],
  now: Date,
): Promise<CountedRun[]> {
  const loaded = await states.loadStates(counted.map((run) => ({ type: DAG_RUN, id: run.runId })));
  const byRun = new Map(loaded.map((state) => [state.aggregate.id, state.data]));
  return counted.filter((run) => {
    const data = byRun.get(run.runId);
    // null: the orchestrator refused the start; undefined: no state (yet).
    if (data === null) return true;
    if (data !== undefined) return (data as OrchestratorState).run.status !== "RUNNING";
    return now.getTime() - Date.parse(run.since) > UNSTARTED_RUN_SECONDS * 1000;
  });
}

/** In memory, for tests. */
export class InMemoryRunsInFlight implements RunsInFlight {
  readonly counted = new Map<string, CountedRun[]>();

  async add(tenant: string, run: CountedRun, cap: number): Promise<RunAdded> {
    const runs = this.counted.get(tenant) ?? [];
    if (runs.some((r) => r.runId === run.runId && r.since === run.since))
      return { ok: true as const };
    if (runs.length >= cap) return { counted: [...runs] };
    this.counted.set(tenant, [...runs, run]);
    return { ok: true as const };
  }

  async remove(tenant: string, runs: readonly CountedRun[]) {
    const gone = (r: CountedRun) => runs.some((g) => g.runId === r.runId && g.since === r.since);
    this.counted.set(
      tenant,
      (this.counted.get(tenant) ?? []).filter((r) => !gone(r)),
    );
  }
}
