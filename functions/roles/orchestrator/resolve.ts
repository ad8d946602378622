import type { WorkflowResetRequested } from "../../../schemas/events/workflow";
import type { WorkflowResolveRequested } from "../../../schemas/events/workflow-resolve";
import { resetNode, resolveNode } from "../../core/dag/resolve";
import { checkStepOutput } from "../../core/steps";
import { applyTransition } from "./apply";
import {
  definitionOf,
  existing,
  type OrchestratorDecision,
  type RunContext,
  refusing,
  rejection,
} from "./context";
import type { OrchestratorState } from "./state";

/**
 * What an operator does with a FAILED node (seed 001 §2.3): reset it (ManualReset: it and its
 * descendants run again under a new generation) or resolve it with an output they supply
 * (HumanResolved: the node counts as COMPLETED with it, the nodes below it run again). Both are
 * refused with `workflow.rejected` for an unknown run or node, a node that is not FAILED, and
 * (resolve) an output that does not fit the node's role (its output schema for a content role; a
 * JSON object for any other step role, whose schema lives in its own code); both tell the agent of the failed
 * assignment that it is closed (`<role>.cancel.requested`, reason reset or resolved), so an agent
 * run that waited for a person (NEEDS_HUMAN) stops waiting.
 *
 * Idempotent: a repeated request finds the node no longer FAILED and is refused, changing nothing.
 */

/** The ManualReset of a FAILED node: it and its descendants run again under a new generation. */
export async function reset(
  context: RunContext,
  { run_id, node_id }: WorkflowResetRequested,
): Promise<OrchestratorDecision> {
  const current = failedNode(context.state, run_id, node_id, "reset");
  const def = definitionOf(context, current);
  const capacity = await context.capacityFor(def);
  const transition = refusing("reset", run_id, node_id, () =>
    resetNode(current.run, def, node_id, capacity),
  );
  return applyTransition(context, current, transition);
}

/** HumanResolved: the FAILED node is COMPLETED with the supplied output, checked by its role. */
export async function resolve(
  context: RunContext,
  { run_id, node_id, output }: WorkflowResolveRequested,
): Promise<OrchestratorDecision> {
  const current = failedNode(context.state, run_id, node_id, "resolve");
  const def = definitionOf(context, current);
  const role = def.nodes.find((n) => n.id === node_id)?.role ?? "";
  const checked = checkStepOutput(context.stepRoles.table[role], output);
  if (!checked.ok)
    throw rejection(
      "resolve",
      run_id,
      node_id,
      "workflow.invalid_output",
      `the output supplied for node ${node_id} (role ${role}) does not fit its schema: ${checked.issues.join("; ")}`,
    );
  const capacity = await context.capacityFor(def);
  const transition = refusing("resolve", run_id, node_id, () =>
    resolveNode(current.run, def, node_id, checked.value, capacity),
  );
  return applyTransition(context, current, transition);
}

/** The run's state, when the run exists and has `nodeId` FAILED; else `workflow.rejected`. */
function failedNode(
  state: OrchestratorState | undefined,
  runId: string,
  nodeId: string,
  request: "reset" | "resolve",
): OrchestratorState {
  const current = existing(state, runId, request, nodeId);
  const node = current.run.nodes[nodeId];
  if (node?.state === "FAILED") return current;
  throw rejection(
    request,
    runId,
    nodeId,
    node ? `workflow.${request}_not_failed` : "dag.unknown_node",
    node
      ? `node ${nodeId} of run ${runId} is ${node.state}; only a FAILED node can be ${request === "reset" ? "reset (use workflow.rerun.requested to run it again)" : "resolved"}`
      : `run ${runId} has no node ${nodeId}`,
  );
}
