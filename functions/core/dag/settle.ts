import { type Draft, edgeOutcome } from "./draft";
import { DagIntegrityError } from "./errors";
import { requireNode } from "./graph";
import { loopStep } from "./loop";
import { runResult } from "./result";
import { LIVE, type NodeError, type RunStatus, TERMINAL } from "./run";
import { stopNode } from "./stop";

/**
 * How a node's end flows downstream: each downstream counter is decremented once, a PENDING node
 * is decided (READY, SKIPPED or CANCELLED) as soon as its join can tell, a loop's last node may
 * start another round instead, and the run ends when nothing is live any more.
 */

export interface Decision {
  readonly state: "READY" | "SKIPPED" | "CANCELLED";
  /** The failed or cancelled upstreams that decided a cancel. */
  readonly failed: readonly string[];
  /** Under join "quorum" or "first-wins": the upstreams whose outputs make the input. */
  readonly joined?: readonly string[];
}

/**
 * What a PENDING node becomes with its upstreams as they are, or undefined while its join must
 * wait: "all" cancels on the first failed branch and otherwise waits for every branch;
 * "any-success" waits for every branch; "quorum" goes once `quorum` branches were taken (and is
 * cancelled or skipped once too few can be); "first-wins" goes with the first branch taken.
 */
export function decision(draft: Draft, id: string): Decision | undefined {
  const definition = requireNode(draft.graph, id);
  const incoming = draft.graph.up.get(id) ?? [];
  if (incoming.length === 0) return { state: "READY", failed: [] };
  const taken: string[] = [];
  const failed: string[] = [];
  let open = 0;
  for (const edge of incoming) {
    const outcome = edgeOutcome(edge, draft.node(edge.from));
    if (outcome === "taken") taken.push(edge.from);
    else if (outcome === "failed") failed.push(edge.from);
    else if (outcome === "open") open++;
  }
  const node = draft.node(id);
  if (open > 0 && node.remaining_upstreams === 0)
    throw new DagIntegrityError(
      "dag.indegree_mismatch",
      `node ${id} has no remaining upstreams by its counter, but ${open} upstream(s) have not ended`,
      { details: { run_id: draft.run.run_id, node: id } },
    );
  const fallen = (): Decision => ({ state: failed.length > 0 ? "CANCELLED" : "SKIPPED", failed });
  switch (definition.join) {
    case "all":
      if (failed.length > 0) return { state: "CANCELLED", failed };
      if (open > 0) return undefined;
      return taken.length > 0 ? { state: "READY", failed } : fallen();
    case "any-success":
      if (open > 0) return undefined;
      return taken.length > 0 ? { state: "READY", failed } : fallen();
    case "quorum": {
      const needed = definition.quorum ?? incoming.length;
      if (taken.length >= needed) return { state: "READY", failed, joined: taken.slice(0, needed) };
      return taken.length + open < needed ? fallen() : undefined;
    }
    case "first-wins":
      if (taken.length > 0) return { state: "READY", failed, joined: taken.slice(0, 1) };
      return open > 0 ? undefined : fallen();
  }
}

/**
 * Decide a PENDING node if its join can tell; returns the nodes that ended by it (the node when
 * SKIPPED or CANCELLED; the branches a first-wins join dropped), which must propagate in turn.
 */
export function settleNode(draft: Draft, id: string): string[] {
  const decided = decision(draft, id);
  if (!decided) return [];
  const { state, failed, joined } = decided;
  draft.put(id, { ...draft.node(id), state, ...(joined ? { joined: [...joined] } : {}) });
  if (state === "READY") {
    draft.events.push({ type: "node.ready", node_id: id, generation: draft.run.generation });
    return requireNode(draft.graph, id).join === "first-wins" ? dropLosers(draft, id) : [];
  }
  if (state === "SKIPPED") draft.events.push({ type: "node.skipped", node_id: id });
  else
    draft.events.push({
      type: "node.cancelled",
      node_id: id,
      reason: "upstream_failed",
      upstreams: [...failed],
    });
  return [id];
}

/**
 * A first-wins join went READY: every other upstream that has not ended is SKIPPED (reason
 * first_wins; a RUNNING one is stopped), so what depends only on it is skipped, not failed.
 */
function dropLosers(draft: Draft, id: string): string[] {
  const winner = draft.node(id).joined?.[0];
  const dropped: string[] = [];
  for (const edge of draft.graph.up.get(id) ?? []) {
    if (edge.from === winner || TERMINAL.has(draft.node(edge.from).state)) continue;
    const stopped = stopNode(draft, edge.from, "first_wins");
    draft.put(edge.from, { ...stopped, state: "SKIPPED" });
    draft.events.push({
      type: "node.skipped",
      node_id: edge.from,
      reason: "first_wins",
      ...(winner ? { winner } : {}),
    });
    dropped.push(edge.from);
  }
  return dropped;
}

/**
 * `endedId` just reached a terminal state: decrement each downstream counter once, decide the
 * downstreams that can be decided, and keep going through the nodes that ended in turn. A loop's
 * last node may instead start the loop's next round (./loop).
 */
export function propagate(draft: Draft, endedId: string): void {
  const queue = [endedId];
  for (let from = queue.shift(); from !== undefined; from = queue.shift()) {
    const step = loopStep(draft, from);
    if (step === "round") {
      queue.push(...settleBody(draft, from));
      continue;
    }
    if (step === "fail")
      failNode(draft, from, {
        code: "dag.loop_max_rounds",
        message: `the loop ending at ${from} ran its ${draft.graph.loops.get(from)?.spec.maxRounds} rounds without its condition holding`,
        error_class: "business",
      });
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
      if (node.state === "PENDING") queue.push(...settleNode(draft, id));
    }
  }
}

/** After a loop's body was reset for its next round: decide its nodes that can be decided. */
function settleBody(draft: Draft, exit: string): string[] {
  const body = new Set(draft.graph.loops.get(exit)?.body);
  const ended: string[] = [];
  for (const id of draft.graph.topo)
    if (body.has(id) && draft.node(id).state === "PENDING") ended.push(...settleNode(draft, id));
  return ended;
}

/** The node ends COMPLETED with `output` (the caller propagates). */
export function completeNode(draft: Draft, id: string, output: unknown, generation: number) {
  const { error: _error, items: _items, ...node } = draft.node(id);
  draft.put(id, { ...node, state: "COMPLETED", output });
  draft.events.push({ type: "node.completed", node_id: id, generation });
}

/**
 * The node ends with `error`: DEGRADED with output {} under `degrade: "empty"`, else FAILED (the
 * caller propagates, which cancels what can no longer run).
 */
export function failNode(draft: Draft, id: string, error: NodeError): void {
  const generation = draft.node(id).assigned_generation ?? draft.run.generation;
  const { items: _items, output: _output, ...node } = draft.node(id);
  if (requireNode(draft.graph, id).degrade === "empty") {
    draft.put(id, { ...node, state: "DEGRADED", output: {}, error });
    draft.events.push({ type: "node.degraded", node_id: id, generation, error });
  } else {
    draft.put(id, { ...node, state: "FAILED", error });
    draft.events.push({ type: "node.failed", node_id: id, generation, error });
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
