import { childRunId } from "./assignment";
import type { Draft } from "./draft";
import { kindOf, requireNode, roleOf } from "./graph";
import type { DagCommand, NodeCancelReason, NodeRun } from "./run";

/**
 * Stopping the work of a RUNNING node whose assignment no longer counts: its agent gets a
 * `node.cancel` (a map node's: one per RUNNING item), a child run a `child.cancel`; a wait needs
 * no command (its timer or signal finds the node no longer waiting). Returns the node without its
 * items; its caller gives it its next state.
 */
export function stopNode(draft: Draft, id: string, reason: NodeCancelReason): NodeRun {
  const { items: _items, ...node } = draft.node(id);
  if (node.state !== "RUNNING") return node;
  const definition = requireNode(draft.graph, id);
  const generation = node.assigned_generation ?? draft.run.generation;
  const base = { run_id: draft.run.run_id, node_id: id, reason } as const;
  switch (kindOf(definition)) {
    case "task":
      draft.commands.push(cancelOf(draft, id, node, reason));
      break;
    case "map":
      for (const [index, item] of (draft.node(id).items ?? []).entries()) {
        if (item.state !== "RUNNING") continue;
        draft.commands.push({
          type: "node.cancel",
          ...base,
          role: roleOf(definition),
          attempt: item.attempt,
          generation: item.assigned_generation ?? generation,
          item: index,
        });
        draft.events.push({ type: "item.cancelled", node_id: id, item: index, generation });
      }
      break;
    case "child":
      draft.commands.push({
        type: "child.cancel",
        ...base,
        attempt: node.attempt,
        generation,
        child_run_id: childRunId(draft.run.run_id, id, node.attempt),
      });
      break;
    case "wait":
      break;
  }
  return node;
}

/** Stop work on (or close) the current assignment of a task node. */
export function cancelOf(
  draft: Draft,
  id: string,
  node: NodeRun,
  reason: NodeCancelReason,
): DagCommand {
  return {
    type: "node.cancel",
    run_id: draft.run.run_id,
    node_id: id,
    role: roleOf(requireNode(draft.graph, id)),
    attempt: node.attempt,
    generation: node.assigned_generation ?? draft.run.generation,
    reason,
  };
}
