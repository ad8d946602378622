import { valueAt } from "./definition";
import { type Draft, edgeOutcome } from "./draft";
import type { DagCommand, ItemRef, LoopRef } from "./run";

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
): DagCommand {
  const loop = loopRefOf(draft, id);
  return {
    type: "node.assign",
    run_id: draft.run.run_id,
    node_id: id,
    role,
    attempt,
    generation,
    input: inputOf(draft, id),
    run_input: draft.run.input,
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

/** The list a map node runs over, or undefined when the value there is not a list. */
export function mapItemsOf(draft: Draft, id: string): readonly unknown[] | undefined {
  const items = draft.graph.nodes.get(id)?.map?.items;
  if (!items) return undefined;
  const list = valueAt(items, draft.node(items.node).output);
  return Array.isArray(list) ? list : undefined;
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

/**
 * The id of the child run an assignment of node `id` starts: one per assignment (the attempt
 * grows with each), so a redelivered start names the same child. Node ids have no "~".
 */
export function childRunId(runId: string, id: string, attempt: number): string {
  return `${runId}~${id}~${attempt}`;
}

/** The round before, for an assignment inside a loop's body that runs a round after the first. */
function loopRefOf(draft: Draft, id: string): LoopRef | undefined {
  const exit = draft.graph.loopOfNode.get(id);
  const record = exit === undefined ? undefined : draft.run.loops?.[exit];
  if (exit === undefined || !record?.previous || record.ended) return undefined;
  return { exit, round: record.round, previous: record.previous };
}
