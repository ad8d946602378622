import type { WorkflowDefinition } from "./definition";
import { checkRun, Draft, edgeOutcome } from "./draft";
import { DagRequestError } from "./errors";
import { graphOf, requireNode, scopeOf } from "./graph";
import { releasePass } from "./release-pass";
import { runResult } from "./result";
import { type Capacity, type DagRun, LIVE, TERMINAL, type Transition } from "./run";
import { decision, finish, propagate, settleNode } from "./settle";
import { stopNode } from "./stop";
import { byString } from "./values";

/**
 * Partial re-run: reset `nodeId` and its descendants (outputs and errors dropped, attempts kept),
 * bump the generation, and recompute their counters from the upstreams that have not ended.
 * Everything else keeps its state and output; the work of RUNNING nodes in the scope is stopped
 * (./stop) and their late deliveries become stale; a loop whose last node is in the scope counts
 * its rounds from 1 again. Throws dag.rerun_blocked when `nodeId` could not run
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
    const node = stopNode(draft, id, "rerun");
    draft.put(id, { state: "PENDING", remaining_upstreams: 0, attempt: node.attempt });
  }
  // A loop whose body the re-run reaches starts counting its rounds again.
  const loops = Object.entries(draft.run.loops ?? {}).filter(([exit]) => !scope.has(exit));
  if (draft.run.loops) draft.run = { ...draft.run, loops: Object.fromEntries(loops) };
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
  const decided = decision(draft, nodeId);
  if (decided?.state === "CANCELLED")
    throw blocked(`every upstream failed or was cancelled (${decided.failed.join(", ")})`, [
      ...decided.failed,
    ]);
  if (decided?.state === "SKIPPED")
    throw blocked("none of its incoming edges is taken, so it would be skipped", []);
  for (const dropped of settleNode(draft, nodeId)) propagate(draft, dropped);
}

/**
 * Cancel the whole run: every node not yet ended is CANCELLED (the work of RUNNING ones is
 * stopped: `node.cancel` per assignment or map item, `child.cancel` per child run), and the run
 * is CANCELLED with what it produced so far. A run that already ended is returned as is.
 */
export function cancelRun(run: DagRun, def: WorkflowDefinition): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  const draft = new Draft(graph, run);
  if (run.status !== "RUNNING") return draft.done();
  for (const id of graph.ids) {
    if (!LIVE.has(draft.node(id).state)) continue;
    draft.put(id, { ...stopNode(draft, id, "run_cancelled"), state: "CANCELLED" });
    draft.events.push({ type: "node.cancelled", node_id: id, reason: "run_cancelled" });
  }
  // Every node has ended, so no counter has anything left to wait for.
  for (const id of graph.ids) draft.put(id, { ...draft.node(id), remaining_upstreams: 0 });
  draft.run = { ...draft.run, status: "CANCELLED" };
  draft.events.push({ type: "run.cancelled", result: runResult(draft.run) });
  return draft.done();
}
