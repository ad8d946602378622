import { letterDigest } from "../../../schemas/ids";
import { type ChildWorkflow, type MapItems, mapListAt, valueAt } from "./definition";
import { type Draft, edgeOutcome } from "./draft";
import type { ChildWorkflowRef, DagCommand, ItemRef, LoopRef } from "./run";
import { isRecord } from "./values";

/**
 * What a node's assignment carries: the outputs it works from, a map item's value, a loop's
 * round before, and the identity of a child run.
 */

/** The `node.assign` command of an assignment of node `id` (of one map item with `item`). */
export function assignment(
  draft: Draft,
  id: string,
  role: string,
  attempt: number,
  generation: number,
  item?: ItemRef,
): Extract<DagCommand, { type: "node.assign" }> {
  const loop = loopRefOf(draft, id);
  return {
    type: "node.assign",
    run_id: draft.run.run_id,
    node_id: id,
    role,
    attempt,
    generation,
    input: item ? itemInputOf(draft, id) : inputOf(draft, id),
    run_input: item ? itemRunInputOf(draft, id) : draft.run.input,
    ...(item ? { item } : {}),
    ...(loop ? { loop } : {}),
  };
}

/**
 * The outputs of the upstreams whose edge into `id` was taken, by node id; under join "quorum"
 * or "first-wins", of the upstreams that released the node.
 */
export function inputOf(draft: Draft, id: string): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  const joined = draft.node(id).joined;
  for (const edge of draft.graph.up.get(id) ?? []) {
    if (joined && !joined.includes(edge.from)) continue;
    const upstream = draft.node(edge.from);
    if (edgeOutcome(edge, upstream) === "taken") input[edge.from] = upstream.output ?? {};
  }
  return input;
}

/**
 * A map item's input: the node's input without the list the map runs over, since each item
 * carries its own value (`item.value`): the list goes once to the map, not once per item, and an
 * item's request stays the size of one item.
 */
function itemInputOf(draft: Draft, id: string): Record<string, unknown> {
  const input = inputOf(draft, id);
  const items = draft.graph.nodes.get(id)?.map?.items;
  if (!items || "input" in items || !(items.node in input)) return input;
  if (items.path === undefined) {
    const { [items.node]: _list, ...others } = input;
    return others;
  }
  return { ...input, [items.node]: without(input[items.node], items.path.split(".")) };
}

/** A map item's run input: without the list when the map runs over one in the run's input. */
function itemRunInputOf(draft: Draft, id: string): unknown {
  const items = draft.graph.nodes.get(id)?.map?.items;
  if (!items || !("input" in items)) return draft.run.input;
  return without(draft.run.input, items.input.split("."));
}

/** `value` with what is at `path` left out (unchanged when nothing is there). */
function without(value: unknown, path: readonly string[]): unknown {
  const [key, ...rest] = path;
  if (key === undefined) return value;
  if (Array.isArray(value)) {
    const index = Number(key);
    if (!Number.isInteger(index) || index < 0 || index >= value.length) return value;
    if (rest.length === 0) return value.filter((_, i) => i !== index);
    return value.map((entry, i) => (i === index ? without(entry, rest) : entry));
  }
  if (!isRecord(value) || !Object.hasOwn(value, key)) return value;
  if (rest.length === 0) {
    const { [key]: _left, ...others } = value;
    return others;
  }
  return { ...value, [key]: without(value[key], rest) };
}

/** The list a map node runs over, or undefined when the value there is not a list. */
export function mapItemsOf(draft: Draft, id: string): readonly unknown[] | undefined {
  const items = draft.graph.nodes.get(id)?.map?.items;
  if (!items) return undefined;
  const list = mapListValue(draft, items);
  return Array.isArray(list) ? list : undefined;
}

/** The value where a map's list should be: in the run's input, or in its upstream's output. */
export function mapListValue(draft: Draft, items: MapItems): unknown {
  return mapListAt(items, draft.run.input, (node) => draft.node(node).output);
}

/** A child node's input: its `workflow.input` fields from earlier outputs, else `inputOf`. */
export function childInputOf(draft: Draft, id: string): unknown {
  const fields = draft.graph.nodes.get(id)?.workflow?.input;
  if (!fields) return inputOf(draft, id);
  return Object.fromEntries(
    Object.entries(fields).map(([field, ref]) => [
      field,
      valueAt(ref, draft.node(ref.node).output),
    ]),
  );
}

/** What a child node's run runs: the workflow it names, or the plan read from an upstream. */
export function childWorkflowOf(draft: Draft, workflow: ChildWorkflow): ChildWorkflowRef {
  const { name, version, plan } = workflow;
  if (name !== undefined) return { name, ...(version === undefined ? {} : { version }) };
  return { plan: plan && valueAt(plan, draft.node(plan.node).output) };
}

/** The `child.start` command of the assignment of child node `id` in `attempt` and `generation`. */
export function childStart(
  draft: Draft,
  id: string,
  workflow: ChildWorkflow,
  attempt: number,
  generation: number,
): Extract<DagCommand, { type: "child.start" }> {
  return {
    type: "child.start",
    run_id: draft.run.run_id,
    node_id: id,
    attempt,
    generation,
    child_run_id: childRunId(draft.run.run_id, id, attempt),
    workflow: childWorkflowOf(draft, workflow),
    input: childInputOf(draft, id),
  };
}

/**
 * The id of the child run an assignment of node `id` starts: one per assignment (the attempt
 * grows with each), so a redelivered start names the same child. An opaque run id (`run_` and 32
 * letters of a digest of the parent run, the node and the attempt; node ids have no "~"), as
 * every run id is.
 */
export function childRunId(runId: string, id: string, attempt: number): string {
  return `run_${letterDigest(`${runId}~${id}~${attempt}`, 32)}`;
}

/** The round before, for an assignment inside a loop's body that runs a round after the first. */
function loopRefOf(draft: Draft, id: string): LoopRef | undefined {
  const exit = draft.graph.loopOfNode.get(id);
  const record = exit === undefined ? undefined : draft.run.loops?.[exit];
  if (exit === undefined || !record?.previous || record.ended) return undefined;
  return { exit, round: record.round, previous: record.previous };
}
