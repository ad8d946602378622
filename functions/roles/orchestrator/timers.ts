import type { Transition } from "../../core/dag/run";
import type { NodeTimer, OrchestratorState } from "./state";

/**
 * Wait nodes (functions/core/dag/wait.ts). The engine starts one with a `wait.start` command; no
 * role carries it out, so it has no lease. The orchestrator keeps its time in the state's
 * `timers` (`until`, or now + `after_seconds` when the command is applied), for the node's
 * assignment, while the node is RUNNING under it; the time joins the run's due time (./leases),
 * and the sweeper reports it with `node.wait.expired` when it comes (./wait-nodes): the engine's
 * `onWaitTimer` completes a timer wait and fails a wait on a signal (`dag.wait_deadline`). A
 * `workflow.signal.requested` goes to the engine's `onSignal`, which releases every wait node
 * RUNNING for that signal; a signal none waits for is recorded in the timeline
 * (`signal.unmatched`, with its key) and changes nothing else.
 */

/**
 * The time of every RUNNING wait node after a transition: new for a node the transition started
 * waiting, kept for a node still RUNNING under the same assignment.
 */
export function timersAfter(
  state: OrchestratorState,
  transition: Transition,
  now: Date,
): Record<string, NodeTimer> {
  const { run } = transition;
  if (run.status !== "RUNNING") return {};
  const timers: Record<string, NodeTimer> = {};
  for (const [nodeId, timer] of Object.entries(state.timers ?? {}))
    if (isCurrent(run.nodes[nodeId], timer)) timers[nodeId] = timer;
  for (const command of transition.commands) {
    if (command.type !== "wait.start") continue;
    const after = (command.after_seconds ?? 0) * 1000;
    const due = command.until === undefined ? now.getTime() + after : Date.parse(command.until);
    timers[command.node_id] = {
      generation: command.generation,
      due_at: new Date(due).toISOString(),
      ...(command.signal === undefined ? {} : { signal: command.signal }),
    };
  }
  return timers;
}

/** The timers of the wait nodes RUNNING under the assignment each was kept for, by node id. */
export function currentTimers(state: OrchestratorState): [string, NodeTimer][] {
  return Object.entries(state.timers ?? {}).filter(([nodeId, timer]) =>
    isCurrent(state.run.nodes[nodeId], timer),
  );
}

/** Whether `timer` is of the node's current assignment, RUNNING. */
export function isCurrent(
  node: OrchestratorState["run"]["nodes"][string] | undefined,
  timer: NodeTimer,
): boolean {
  return node?.state === "RUNNING" && node.assigned_generation === timer.generation;
}
