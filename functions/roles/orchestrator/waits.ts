import type { NodeDependencyExpired } from "../../../schemas/events/agent-run";
import type { WorkflowDefinition } from "../../core/dag/definition";
import type { NodeError } from "../../core/dag/run";
import { isWaiting, onDependencyTimeout } from "../../core/dag/timeout";
import { applyTransition } from "./apply";
import { definitionOf, type OrchestratorDecision, type RunContext } from "./context";
import type { OrchestratorState } from "./state";

/**
 * Dependency timeouts (seed 001 §2, DependencyTimeout): every node that waits (PENDING for its
 * inputs, or READY and held back) has a deadline in the state's `waits`, set when its wait begins
 * (the run's start, or the re-run, reset or resolve that put it back to waiting) to now + its
 * dependency timeout: the node's `dependencyTimeoutSeconds`, else its workflow's, else the
 * orchestrator's (`ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS`, a day by default). The deadline goes
 * when the node is released or ends. The earliest one joins the run's due time; the sweeper reports
 * one that passed with `node.dependency.expired`, and the node ends FAILED with code
 * `agent_run.dependency_timeout` (DEGRADED under `degrade: "empty"`), so the nodes below it are
 * cancelled and the run reaches its end instead of waiting for inputs that never come. The deadlines are kept by ./deadlines.
 */

export const DEPENDENCY_TIMEOUT = "agent_run.dependency_timeout";

/**
 * The sweeper found a waiting node past its deadline: the node gives up (FAILED or DEGRADED).
 * Changes nothing when the node no longer waits, waits in another generation, or its deadline was
 * moved past now.
 */
export async function dependencyExpired(
  context: RunContext,
  report: NodeDependencyExpired,
): Promise<OrchestratorDecision> {
  const { state, leasing, capacityFor } = context;
  if (state?.run.status !== "RUNNING") return {};
  const wait = state.waits?.[report.node_id];
  const node = state.run.nodes[report.node_id];
  if (!wait || !node || !isWaiting(node.state) || wait.generation !== report.generation) return {};
  if (Date.parse(wait.due_at) > leasing.now.getTime()) return {};
  const def = definitionOf(context, state);
  const error: NodeError = {
    code: DEPENDENCY_TIMEOUT,
    error_class: "transient",
    message: `node ${report.node_id} waited for ${node.state === "READY" ? "its release" : `its inputs (${openUpstreams(def, state, report.node_id).join(", ") || "none open"})`} since ${wait.since}; its dependency timeout ran out at ${wait.due_at}`,
  };
  const transition = onDependencyTimeout(
    state.run,
    def,
    report.node_id,
    error,
    await capacityFor(def),
  );
  return applyTransition(context, state, transition);
}

/** The upstreams of a node that have not ended. */
function openUpstreams(
  def: WorkflowDefinition,
  state: OrchestratorState,
  nodeId: string,
): string[] {
  return def.edges
    .filter((e) => e.to === nodeId)
    .map((e) => e.from)
    .filter((id) => {
      const upstream = state.run.nodes[id]?.state;
      return upstream === "PENDING" || upstream === "READY" || upstream === "RUNNING";
    });
}
