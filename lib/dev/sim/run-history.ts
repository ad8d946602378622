import type { WorkflowDefinition } from "../../../functions/core/dag/definition";
import type { DagRun } from "../../../functions/core/dag/run";
import { deepEqual } from "../../../functions/core/dag/values";
import { type OrchestratorState, parseRunState } from "../../../functions/roles/orchestrator/state";
import type { SignalFacts, WaitEnd } from "../faults/workflow-invariants";
import type { RunStateWrite } from "./faulty-store";

/**
 * What the states a run's commits wrote, one after another, show of its wait nodes and of the
 * signals sent to it (lib/dev/faults/workflow-invariants.ts): every commit that ended a wait
 * node's assignment (or changed its end), and each signal's commit with the state before it.
 */

/** A signal sent to a run: its event's id and its key. */
export interface SentSignal {
  readonly eventId: string;
  readonly key: string;
}

const ENDED = new Set(["COMPLETED", "FAILED", "DEGRADED", "CANCELLED", "SKIPPED"]);

type NodeState = DagRun["nodes"][string];

/** The run's states in commit order, each with the event its commit applied. */
function statesOf(writes: readonly RunStateWrite[], runId: string) {
  return writes
    .filter((w) => w.runId === runId)
    .flatMap((w) => {
      const state = parseRunState(w.state);
      return state ? [{ eventId: w.eventId, state }] : [];
    });
}

/** Whether `after` ends the node, or changes the end it had in `before`. */
function endsOrChanges(before: NodeState | undefined, after: NodeState | undefined): boolean {
  if (!after || !ENDED.has(after.state)) return false;
  if (!before || !ENDED.has(before.state)) return true;
  return (
    before.state !== after.state ||
    before.assigned_generation !== after.assigned_generation ||
    !deepEqual(before.output, after.output) ||
    before.error?.code !== after.error?.code
  );
}

/**
 * Every end of a wait node's assignment the run's states show, with the type of the event whose
 * commit ended it (`eventTypes` by event id).
 */
export function waitEndsOf(
  definition: WorkflowDefinition,
  runId: string,
  writes: readonly RunStateWrite[],
  eventTypes: ReadonlyMap<string, string>,
): WaitEnd[] {
  const waits = definition.nodes.filter((n) => n.wait).map((n) => n.id);
  const ends: WaitEnd[] = [];
  let before: OrchestratorState | undefined;
  for (const { eventId, state } of statesOf(writes, runId)) {
    for (const node of waits) {
      const after = state.run.nodes[node];
      if (!after || !endsOrChanges(before?.run.nodes[node], after)) continue;
      const releasedBy = (after.output as { released_by?: unknown } | undefined)?.released_by;
      ends.push({
        node,
        generation: after.assigned_generation ?? state.run.generation,
        state: after.state,
        ...(typeof releasedBy === "string" ? { releasedBy } : {}),
        ...(after.error ? { error: after.error.code } : {}),
        cause: eventTypes.get(eventId ?? "") ?? "an unknown event",
      });
    }
    before = state;
  }
  return ends;
}

/** Each signal sent to the run, with what its commit found and did (none: it was refused). */
export function signalsOf(
  definition: WorkflowDefinition,
  runId: string,
  writes: readonly RunStateWrite[],
  sent: readonly SentSignal[],
): SignalFacts[] {
  const states = statesOf(writes, runId);
  return sent.map(({ eventId, key }) => {
    const at = states.findIndex((s) => s.eventId === eventId);
    const after = states[at]?.state;
    if (!after) return { key };
    const before = states[at - 1]?.state;
    const waits = definition.nodes.filter((n) => n.wait?.signal === key).map((n) => n.id);
    const was = (node: string) => before?.run.nodes[node];
    const running = before?.run.status === "RUNNING";
    const unmatchedIn = (state: OrchestratorState | undefined) =>
      (state?.timeline ?? []).filter((e) => e.event === "signal.unmatched" && e.signal === key)
        .length;
    return {
      key,
      applied: {
        waiting: waits.filter((node) => running && was(node)?.state === "RUNNING"),
        released: waits.filter(
          (node) => was(node)?.state === "RUNNING" && after.run.nodes[node]?.state !== "RUNNING",
        ),
        unmatched: unmatchedIn(after) > unmatchedIn(before),
        runChanged: !deepEqual(before?.run, after.run),
        timedOut: waits.filter((node) => was(node)?.error?.code === "dag.wait_deadline"),
      },
    };
  });
}
