import type { WorkflowDefinition } from "./definition";
import { checkRun, Draft } from "./draft";
import { DagRequestError } from "./errors";
import { graphOf, kindOf, requireNode } from "./graph";
import { releasePass } from "./release-pass";
import { resetScope, settleSeed } from "./rerun";
import type { Capacity, DagRun, Transition } from "./run";
import { finish, propagate } from "./settle";
import { cancelOf } from "./stop";

/**
 * What a person does with a FAILED node (seed 001 §2.3: ManualReset, and HumanResolved of a
 * NEEDS_HUMAN agent run):
 *
 * - `resetNode`: the node and its descendants run again under a new generation, as a re-run from
 *   the node does.
 * - `resolveNode`: the person supplies the node's output. The node and its descendants are reset
 *   under a new generation (the descendants a failure cancelled can run again), then the node
 *   counts as COMPLETED with that output at once, without being assigned to an agent; its
 *   downstreams are decided and released as after any completion.
 *
 * Both close the failed assignment: a `node.cancel` with reason `reset` or `resolved` for the
 * generation that failed, so the agent can end its record of it (a NEEDS_HUMAN agent run leaves
 * the list of what waits for a person). Checking the output against the node's schema is the
 * caller's part (the DAG knows no output shapes).
 */

/** Reset a FAILED node: it and its descendants run again under a new generation. */
export function resetNode(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  capacity: Capacity = {},
): Transition {
  const draft = failedNodeDraft(run, def, nodeId, "reset");
  closeFailedAssignment(draft, nodeId, "reset");
  resetScope(draft, run, nodeId);
  settleSeed(draft, run, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/** Resolve a FAILED node with `output`: COMPLETED under a new generation, downstreams go on. */
export function resolveNode(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  output: unknown,
  capacity: Capacity = {},
): Transition {
  const draft = failedNodeDraft(run, def, nodeId, "resolve");
  closeFailedAssignment(draft, nodeId, "resolved");
  resetScope(draft, run, nodeId);
  // A FAILED node's upstreams had all ended, so the seed is decided (READY) at once unless a
  // failed upstream or an untaken edge would keep it from running: then it cannot be resolved.
  settleSeed(draft, run, nodeId);
  const generation = draft.run.generation;
  const { error: _error, ...node } = draft.node(nodeId);
  draft.put(nodeId, { ...node, state: "COMPLETED", output, assigned_generation: generation });
  draft.events.push({ type: "node.resolved", node_id: nodeId, generation });
  propagate(draft, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/** A working copy of the run, refusing a node that is not FAILED (dag.node_not_failed). */
function failedNodeDraft(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  request: "reset" | "resolve",
): Draft {
  const graph = graphOf(def);
  checkRun(run, graph);
  requireNode(graph, nodeId);
  const draft = new Draft(graph, run);
  const state = draft.node(nodeId).state;
  if (state !== "FAILED")
    throw new DagRequestError(
      "dag.node_not_failed",
      `cannot ${request} node ${nodeId} of run ${run.run_id}: it is ${state}, and only a FAILED node can be ${request === "reset" ? "reset" : "resolved"}`,
      { details: { run_id: run.run_id, node: nodeId, state } },
    );
  return draft;
}

/** The agent of the failed assignment is told it is closed (reset or resolved by a person). */
function closeFailedAssignment(draft: Draft, nodeId: string, reason: "reset" | "resolved"): void {
  const node = draft.node(nodeId);
  // Only a task node's failed assignment is an agent's record to close.
  if (node.assigned_generation === undefined) return;
  if (kindOf(requireNode(draft.graph, nodeId)) !== "task") return;
  draft.commands.push(cancelOf(draft, nodeId, node, reason));
}
