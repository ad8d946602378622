import { assignment, mapItemsOf, mapListValue } from "./assignment";
import { itemsLabel, type MapSpec } from "./definition";
import type { Draft } from "./draft";
import { requireNode, roleOf } from "./graph";
import type { HeldReason, MapItemRun, NodeError } from "./run";
import { completeNode, failNode } from "./settle";
import { stopNode } from "./stop";
import { show } from "./values";

/**
 * Map nodes: a node whose role runs once per item of a list, the value at `map.items.path` in
 * the output of an upstream node, or at `map.items.input` in the run's input. Released, the node
 * goes RUNNING with one record per item (PENDING); items are assigned in list order,
 * `map.concurrency` at a time and within the run's caps, each with its own attempt under the
 * map's generation, so a redelivered or stale answer for an item is told apart from the item's
 * current assignment. Once every item ended the node
 * is COMPLETED with `{ items: [{ status: "completed", output } | { status: "failed", error }],
 * failed }` in list order; as soon as more items failed than `maxFailed` (or
 * `maxFailedFraction` of the items, default 0) tolerate, the items still running are cancelled
 * and the node fails (`dag.map_failed`; DEGRADED under degrade "empty"). A value that is not a
 * list, or a list longer than `map.maxItems`, fails the node at its release.
 */

/** The result of one item in a map node's output. */
export type MapItemResult =
  | { readonly status: "completed"; readonly output: unknown }
  | { readonly status: "failed"; readonly error?: NodeError };

/** What a release pass lets a map node use: its caps, item by item. */
export interface ItemSlots {
  heldReason(role: string): HeldReason | undefined;
  take(role: string): void;
}

/**
 * Whether a RUNNING node has work in flight, whose answer will come back to its run: any RUNNING
 * node but a map node none of whose items is RUNNING. Such a map's PENDING items were held back
 * by a cap; no answer is on its way to release them, so its run needs a release nudge as a run
 * with nothing RUNNING does (the orchestrator's due time, the sweeper's release request).
 */
export function hasWorkInFlight(node: {
  readonly state: string;
  readonly items?: readonly { readonly state: string }[];
}): boolean {
  if (node.state !== "RUNNING") return false;
  return node.items === undefined || node.items.some((item) => item.state === "RUNNING");
}

/**
 * Release a READY map node: RUNNING with its items PENDING. Returns true when the node ended at
 * once (its list is missing, too long or empty) and must propagate.
 */
export function startMap(draft: Draft, id: string): boolean {
  const definition = requireNode(draft.graph, id);
  const spec = definition.map as MapSpec;
  const node = draft.node(id);
  const generation = draft.run.generation;
  const attempt = node.attempt + 1;
  draft.put(id, { ...node, state: "RUNNING", attempt, assigned_generation: generation });
  const list = mapItemsOf(draft, id);
  const where = itemsLabel(spec.items);
  if (!list || list.length > spec.maxItems) {
    const items = spec.items;
    // Not a list: the upstream's whole output, or what the run's input has at the path.
    const value =
      list ?? ("input" in items ? mapListValue(draft, items) : draft.node(items.node).output);
    failNode(draft, id, {
      code: list ? "dag.map_too_many_items" : "dag.map_items_invalid",
      message: list
        ? `map node ${id}: ${where} has ${list.length} items, more than its maxItems ${spec.maxItems}`
        : `map node ${id}: ${where} is not a list (got ${show(value)})`,
      error_class: "permanent",
    });
    return true;
  }
  const items: MapItemRun[] = list.map(() => ({ state: "PENDING", attempt: 0 }));
  draft.put(id, { ...draft.node(id), items });
  draft.events.push({
    type: "node.released",
    node_id: id,
    role: roleOf(definition),
    attempt,
    generation,
  });
  draft.events.push({ type: "map.started", node_id: id, generation, items: items.length });
  if (items.length > 0) return false;
  completeNode(draft, id, { items: [], failed: 0 }, generation);
  return true;
}

/**
 * Assign PENDING items of a RUNNING map node in list order while its concurrency and the caps
 * allow; returns why the next item was held back by a cap, if one was.
 */
export function releaseItems(draft: Draft, id: string, slots: ItemSlots): HeldReason | undefined {
  const definition = requireNode(draft.graph, id);
  const spec = definition.map as MapSpec;
  const role = roleOf(definition);
  const node = draft.node(id);
  const items = [...(node.items ?? [])];
  let running = items.filter((item) => item.state === "RUNNING").length;
  const generation = node.assigned_generation ?? draft.run.generation;
  const list = mapItemsOf(draft, id) ?? [];
  let held: HeldReason | undefined;
  for (const [index, item] of items.entries()) {
    if (item.state !== "PENDING" || running >= spec.concurrency) continue;
    held = slots.heldReason(role);
    if (held) break;
    slots.take(role);
    running++;
    const attempt = item.attempt + 1;
    items[index] = { state: "RUNNING", attempt, assigned_generation: generation };
    const ref = { index, count: items.length, value: list[index] };
    draft.commands.push(assignment(draft, id, role, attempt, generation, ref));
    draft.events.push({ type: "item.released", node_id: id, item: index, attempt, generation });
  }
  draft.put(id, { ...node, items });
  return held;
}

/**
 * Record the end of item `index` (RUNNING under the map's generation, checked by the caller).
 * Returns true when the map node ended by it (all items ended, or over the tolerance).
 */
export function recordItem(
  draft: Draft,
  id: string,
  index: number,
  end: { output: unknown } | { error: NodeError },
): boolean {
  const node = draft.node(id);
  const generation = node.assigned_generation ?? draft.run.generation;
  const items = [...(node.items ?? [])];
  const item = items[index] as MapItemRun;
  const { output: _o, error: _e, ...kept } = item;
  items[index] =
    "error" in end
      ? { ...kept, state: "FAILED", error: end.error }
      : { ...kept, state: "COMPLETED", output: end.output };
  draft.put(id, { ...node, items });
  const type = "error" in end ? "item.failed" : "item.completed";
  draft.events.push({ type, node_id: id, item: index, generation });
  const failed = items.filter((i) => i.state === "FAILED").length;
  const spec = requireNode(draft.graph, id).map as MapSpec;
  const tolerated =
    spec.maxFailedFraction === undefined
      ? (spec.maxFailed ?? 0)
      : Math.floor(spec.maxFailedFraction * items.length);
  if (failed > tolerated) {
    draft.put(id, stopNode(draft, id, "map_failed"));
    failNode(draft, id, {
      code: "dag.map_failed",
      message: `map node ${id}: ${failed} of ${items.length} items failed, more than the ${tolerated} it tolerates`,
      error_class: "business",
    });
    return true;
  }
  if (items.some((i) => i.state === "PENDING" || i.state === "RUNNING")) return false;
  const results: MapItemResult[] = items.map((i) =>
    i.state === "COMPLETED"
      ? { status: "completed", output: i.output }
      : { status: "failed", ...(i.error ? { error: i.error } : {}) },
  );
  completeNode(draft, id, { items: results, failed }, generation);
  return true;
}
