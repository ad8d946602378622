import type {
  NodeWaitExpired,
  WorkflowSignalRequested,
} from "../../../schemas/events/workflow-wait";
import { onSignal, onWaitTimer } from "../../core/dag/wait";
import { applyTransition } from "./apply";
import {
  definitionOf,
  existing,
  type OrchestratorDecision,
  type RunContext,
  refusing,
} from "./context";
import { isCurrent } from "./timers";

/** What the orchestrator does when a wait node's time comes, and with a signal (./timers). */

/**
 * The sweeper found a wait node's time come: `onWaitTimer`. Changes nothing when the node no
 * longer waits under that assignment, or its time is not yet (a report ahead of the clock).
 */
export async function waitExpired(
  context: RunContext,
  report: NodeWaitExpired,
): Promise<OrchestratorDecision> {
  const { state, leasing, capacityFor } = context;
  if (state?.run.status !== "RUNNING") return {};
  const timer = state.timers?.[report.node_id];
  if (!timer || timer.generation !== report.generation) return {};
  if (!isCurrent(state.run.nodes[report.node_id], timer)) return {};
  if (Date.parse(timer.due_at) > leasing.now.getTime()) return {};
  const def = definitionOf(context, state);
  const capacity = await capacityFor(def);
  return applyTransition(
    context,
    state,
    onWaitTimer(state.run, def, report.node_id, report.generation, capacity),
  );
}

/**
 * A signal sent to a run: the wait nodes RUNNING for it complete with its payload; none waiting
 * records `signal.unmatched`. Refused (`workflow.rejected`) for a run that was never started.
 */
export async function signal(
  context: RunContext,
  { run_id, signal, payload }: WorkflowSignalRequested,
): Promise<OrchestratorDecision> {
  const current = existing(context.state, run_id, "signal");
  const def = definitionOf(context, current);
  const capacity = await context.capacityFor(def);
  const transition = refusing("signal", run_id, undefined, () =>
    onSignal(current.run, def, signal, payload ?? {}, capacity),
  );
  return applyTransition(context, current, transition);
}
