import type { WorkflowDefinition } from "./definition";
import { checkRun, Draft, edgeOutcome } from "./draft";
import { DagRequestError } from "./errors";
import { type Graph, graphOf, requireNode, scopeOf } from "./graph";
import { releasePass } from "./release-pass";
import { runResult } from "./result";
import {
  type Capacity,
  type DagCommand,
  type DagRun,
  LIVE,
  type NodeCancelReason,
  type NodeRun,
  TERMINAL,
  type Transition,
} from "./run";
import { finish, settlement, settleNode } from "./settle";
import { byString } from "./values";

/**
 * Partial re-run: reset `nodeId` and its descendants (outputs and errors dropped, attempts kept),
 * bump the generation, and recompute their counters from the upstreams that have not ended.
 * Everything else keeps its state and output; RUNNING nodes in the scope get a `node.cancel`
 * and their late deliveries become stale. Throws dag.rerun_blocked when `nodeId` could not run
 * (an upstream failed or was cancelled, or none of its incoming edges is taken).
 */
export function rerunFrom(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  capacity: Capacity = {},
): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  requireNode(graph, nodeId);
  const draft = new Draft(graph, run);
  resetScope(draft, run, nodeId);
  settleSeed(draft, run, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/** Bump the generation and put the re-run's scope back to PENDING with recounted in-degrees. */
export function resetScope(draft: Draft, run: DagRun, nodeId: string): void {
  const { graph } = draft;
  const scope = scopeOf(graph, nodeId);
  const generation = run.generation + 1;
  draft.run = { ...draft.run, generation, status: "RUNNING" };
  const inScope = graph.topo.filter((id) => scope.has(id));
  for (const id of inScope) {
    const node = draft.node(id);
    if (node.state === "RUNNING") draft.commands.push(cancelCommand(run, graph, id, node, "rerun"));
    draft.put(id, { state: "PENDING", remaining_upstreams: 0, attempt: node.attempt });
  }
  for (const id of inScope) {
    const open = (graph.up.get(id) ?? []).filter(
      (edge) => !TERMINAL.has(draft.node(edge.from).state),
    ).length;
    draft.put(id, { ...draft.node(id), remaining_upstreams: open });
  }
  draft.events.push({
    type: "run.rerun",
    from: nodeId,
    generation,
    nodes: [...scope].sort(byString),
  });
}

/** Decide the re-run's seed when nothing it waits for is open; refuse a seed that could not run. */
export function settleSeed(draft: Draft, run: DagRun, nodeId: string): void {
  const { graph } = draft;
  const blocked = (why: string, upstreams: string[]) =>
    new DagRequestError("dag.rerun_blocked", `cannot re-run ${nodeId}: ${why}`, {
      details: { run_id: run.run_id, node: nodeId, upstreams },
    });
  const failedUpstreams = (graph.up.get(nodeId) ?? [])
    .filter((edge) => edgeOutcome(edge, draft.node(edge.from)) === "failed")
    .map((edge) => edge.from);
  if (requireNode(graph, nodeId).join === "all" && failedUpstreams.length > 0)
    throw blocked(
      `upstream ${failedUpstreams.join(", ")} failed or was cancelled; re-run from there`,
      failedUpstreams,
    );
  if (draft.node(nodeId).remaining_upstreams !== 0) return;
  const { state, failed } = settlement(draft, nodeId);
  if (state === "CANCELLED")
    throw blocked(`every upstream failed or was cancelled (${failed.join(", ")})`, failed);
  if (state === "SKIPPED")
    throw blocked("none of its incoming edges is taken, so it would be skipped", []);
  settleNode(draft, nodeId);
}

/**
 * Cancel the whole run: every node not yet ended is CANCELLED (RUNNING ones get a `node.cancel`),
 * and the run is CANCELLED with what it produced so far. A run that already ended is returned as is.
 */
export function cancelRun(run: DagRun, def: WorkflowDefinition): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  const draft = new Draft(graph, run);
  if (run.status !== "RUNNING") return draft.done();
  for (const id of graph.ids) {
    const node = draft.node(id);
    if (!LIVE.has(node.state)) continue;
    if (node.state === "RUNNING")
      draft.commands.push(cancelCommand(run, graph, id, node, "run_cancelled"));
    draft.put(id, { ...node, state: "CANCELLED" });
    draft.events.push({ type: "node.cancelled", node_id: id, reason: "run_cancelled" });
  }
  // Every node has ended, so no counter has anything left to wait for.
  for (const id of graph.ids) draft.put(id, { ...draft.node(id), remaining_upstreams: 0 });
  draft.run = { ...draft.run, status: "CANCELLED" };
  draft.events.push({ type: "run.cancelled", result: runResult(draft.run) });
  return draft.done();
}

/** Stop work on (or close) the current assignment of a node of `run`. */
export function cancelCommand(
  run: DagRun,
  graph: Graph,
  id: string,
  node: NodeRun,
  reason: NodeCancelReason,
): DagCommand {
  return {
    type: "node.cancel",
    run_id: run.run_id,
    node_id: id,
    role: requireNode(graph, id).role,
    attempt: node.attempt,
    generation: node.assigned_generation ?? run.generation,
    reason,
  };
}
