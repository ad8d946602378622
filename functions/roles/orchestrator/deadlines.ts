import type { WorkflowDefinition } from "../../core/dag/definition";
import type { Transition } from "../../core/dag/run";
import { dependencyTimeoutOf, isWaiting } from "../../core/dag/timeout";
import type { Leasing } from "./leases";
import type { NodeWait, OrchestratorState } from "./state";

/**
 * The deadline of every waiting node after a transition: kept for a node that was already waiting
 * in the same generation, new (now + its timeout) for one whose wait begins here.
 */
export function waitsAfter(
  state: OrchestratorState,
  def: WorkflowDefinition,
  transition: Transition,
  { now, policy }: Leasing,
): Record<string, NodeWait> {
  const { run } = transition;
  if (run.status !== "RUNNING") return {};
  const before = state.waits ?? {};
  const waits: Record<string, NodeWait> = {};
  for (const [nodeId, node] of Object.entries(run.nodes)) {
    if (!isWaiting(node.state)) continue;
    const kept = before[nodeId];
    const wasWaiting = isWaiting(state.run.nodes[nodeId]?.state ?? "");
    if (kept && wasWaiting && kept.generation === run.generation) {
      waits[nodeId] = kept;
      continue;
    }
    const seconds = dependencyTimeoutOf(def, nodeId, policy.dependencySeconds);
    waits[nodeId] = {
      generation: run.generation,
      since: now.toISOString(),
      due_at: new Date(now.getTime() + seconds * 1000).toISOString(),
    };
  }
  return waits;
}
