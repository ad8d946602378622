import type { WorkflowDefinition } from "./definition";
import { checkRun, Draft } from "./draft";
import { graphOf, requireNode } from "./graph";
import { releasePass } from "./release-pass";
import type { Capacity, DagRun, NodeError, Transition } from "./run";
import { failNode, finish, propagate } from "./settle";

/**
 * The dependency timeout (seed 001 §2: READY --DependencyTimeout--> FAILED): a node that is still
 * waiting (PENDING for its inputs, or READY but held back) when its wait runs out gives up. It
 * ends FAILED with `error` (DEGRADED with output {} when its policy is `degrade: "empty"`, as for
 * any failure), the nodes below it that can no longer run are CANCELLED, and the run ends once
 * nothing is live. Upstreams still RUNNING keep running under their own leases; when they end,
 * the in-degree of the timed-out node is counted down as for any ended node.
 *
 * A node that is no longer waiting (released, ended, or reset under another generation) is left
 * alone: the transition changes nothing.
 */

/** Seconds a node may wait when neither it nor its workflow says (a day). */
export const DEFAULT_DEPENDENCY_TIMEOUT_SECONDS = 24 * 3600;

/** The dependency timeout of `nodeId`: the node's, else the workflow's, else `fallback`. */
export function dependencyTimeoutOf(
  def: WorkflowDefinition,
  nodeId: string,
  fallback: number = DEFAULT_DEPENDENCY_TIMEOUT_SECONDS,
): number {
  const node = def.nodes.find((n) => n.id === nodeId);
  return node?.dependencyTimeoutSeconds ?? def.dependencyTimeoutSeconds ?? fallback;
}

/** Whether a node state is a wait a dependency timeout applies to. */
export const isWaiting = (state: string): boolean => state === "PENDING" || state === "READY";

/** The waiting node `nodeId` gives up with `error`; nothing changes when it no longer waits. */
export function onDependencyTimeout(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  error: NodeError,
  capacity: Capacity = {},
): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  requireNode(graph, nodeId);
  const draft = new Draft(graph, run);
  if (run.status !== "RUNNING" || !isWaiting(draft.node(nodeId).state)) return draft.done();
  failNode(draft, nodeId, error);
  propagate(draft, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}
