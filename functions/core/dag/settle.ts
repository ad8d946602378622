import { type Draft, edgeOutcome } from "./draft";
import { DagIntegrityError } from "./errors";
import { requireNode } from "./graph";
import { runResult } from "./result";
import { LIVE, type RunStatus } from "./run";

/**
 * How a node's end flows downstream: each downstream counter is decremented once, a node whose
 * upstreams have all ended is decided (READY, SKIPPED or CANCELLED by its join), and the run ends
 * when nothing is live any more.
 */

/** READY, SKIPPED or CANCELLED for a PENDING node whose upstreams have all ended. */
export function settlement(
  draft: Draft,
  id: string,
): { state: "READY" | "SKIPPED" | "CANCELLED"; failed: string[] } {
  const definition = requireNode(draft.graph, id);
  const incoming = draft.graph.up.get(id) ?? [];
  if (incoming.length === 0) return { state: "READY", failed: [] };
  let taken = false;
  const failed: string[] = [];
  for (const edge of incoming) {
    const outcome = edgeOutcome(edge, draft.node(edge.from));
    if (outcome === "open")
      throw new DagIntegrityError(
        "dag.indegree_mismatch",
        `node ${id} has no remaining upstreams by its counter, but upstream ${edge.from} is still ${draft.node(edge.from).state}`,
        { details: { run_id: draft.run.run_id, node: id, upstream: edge.from } },
      );
    if (outcome === "taken") taken = true;
    if (outcome === "failed") failed.push(edge.from);
  }
  if (definition.join === "all" && failed.length > 0) return { state: "CANCELLED", failed };
  if (taken) return { state: "READY", failed };
  if (failed.length > 0) return { state: "CANCELLED", failed };
  return { state: "SKIPPED", failed };
}

/** Apply a decision to a PENDING node; returns true when the node ended (and must propagate). */
export function settleNode(draft: Draft, id: string): boolean {
  const node = draft.node(id);
  const { state, failed } = settlement(draft, id);
  draft.put(id, { ...node, state });
  if (state === "READY") {
    draft.events.push({ type: "node.ready", node_id: id, generation: draft.run.generation });
    return false;
  }
  if (state === "SKIPPED") draft.events.push({ type: "node.skipped", node_id: id });
  else
    draft.events.push({
      type: "node.cancelled",
      node_id: id,
      reason: "upstream_failed",
      upstreams: failed,
    });
  return true;
}

/**
 * `endedId` just reached a terminal state: decrement each downstream counter once, cancel or
 * decide the downstreams it unblocked, and keep going through the nodes that ended in turn.
 */
export function propagate(draft: Draft, endedId: string): void {
  const queue = [endedId];
  for (let from = queue.shift(); from !== undefined; from = queue.shift()) {
    const upstream = draft.node(from);
    for (const edge of draft.graph.down.get(from) ?? []) {
      const id = edge.to;
      const node = draft.node(id);
      const remaining = node.remaining_upstreams - 1;
      if (remaining < 0)
        throw new DagIntegrityError(
          "dag.negative_indegree",
          `in-degree of node ${id} would become ${remaining} when ${from} ended (run ${draft.run.run_id}): a duplicate edge or a duplicate completion was counted`,
          { details: { run_id: draft.run.run_id, node: id, upstream: from, remaining } },
        );
      draft.put(id, { ...node, remaining_upstreams: remaining });
      if (node.state !== "PENDING") continue;
      const join = requireNode(draft.graph, id).join;
      if (join === "all" && edgeOutcome(edge, upstream) === "failed") {
        draft.put(id, { ...node, remaining_upstreams: remaining, state: "CANCELLED" });
        draft.events.push({
          type: "node.cancelled",
          node_id: id,
          reason: "upstream_failed",
          upstreams: [from],
        });
        queue.push(id);
      } else if (remaining === 0 && settleNode(draft, id)) {
        queue.push(id);
      }
    }
  }
}

/** End the run when nothing is PENDING, READY or RUNNING any more. */
export function finish(draft: Draft): void {
  if (draft.run.status !== "RUNNING") return;
  const states = draft.graph.ids.map((id) => draft.node(id).state);
  if (states.some((s) => LIVE.has(s))) return;
  const ok = states.every((s) => s === "COMPLETED" || s === "DEGRADED" || s === "SKIPPED");
  const status: RunStatus = ok ? "COMPLETED" : states.includes("COMPLETED") ? "PARTIAL" : "FAILED";
  draft.run = { ...draft.run, status };
  const type =
    status === "COMPLETED" ? "run.completed" : status === "PARTIAL" ? "run.partial" : "run.failed";
  draft.events.push({ type, result: runResult(draft.run) });
}
