import { OpaqueId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { ItemIndex, NodeRefShape, RequestedByShape } from "./fields";
import { outsideCommand, streamFact } from "./kinds";
import { WorkflowEndedPayload } from "./workflow";

/**
 * Cancelling a run (seed 001 §4, TaskCancel on the command channel):
 *
 * - `workflow.cancel.requested`: an operator asks for the run to stop (unsequenced, aggregate
 *   `dag_run/<run_id>` at version 0, like the other operator commands), saying who and why.
 * - `workflow.cancelled`: the orchestrator ended the run CANCELLED (on the run's stream), with the
 *   run's result so far and the request's reason and requester.
 * - a step role's cancel (`NodeCancelRequestedPayload`): the orchestrator tells the role of a node
 *   that its assignment (run, node, generation) no longer counts, on the run's stream, so it
 *   reaches the role's group on the same channel and in the same order as its request (./step.ts).
 */

export const WorkflowCancelRequestedPayload = z.object({ run_id: OpaqueId, ...RequestedByShape });
export type WorkflowCancelRequested = z.infer<typeof WorkflowCancelRequestedPayload>;

export const WorkflowCancelledPayload = z.extend(WorkflowEndedPayload, RequestedByShape);
export type WorkflowCancelled = z.infer<typeof WorkflowCancelledPayload>;

/**
 * Why an assignment no longer counts: the run was cancelled, or a re-run (or reset) gave the node
 * a new generation while this one was still RUNNING; or, for an assignment that ended FAILED, an
 * operator reset the node (`reset`: it runs again under a new generation) or resolved it with a
 * supplied output (`resolved`), which closes the agent's record of the failed assignment; or,
 * for an item of a map node, more items failed than the map tolerates (`map_failed`); or another
 * upstream of a first-wins join won, and this branch is dropped (`first_wins`).
 */
export const NODE_CANCEL_REASONS = [
  "run_cancelled",
  "rerun",
  "reset",
  "resolved",
  "map_failed",
  "first_wins",
] as const;
export const NodeCancelRequestedPayload = z.object({
  ...NodeRefShape,
  reason: z.enum(NODE_CANCEL_REASONS),
  /** The map item whose assignment no longer counts (its index), for an item of a map node. */
  item: z.optional(ItemIndex),
});
export type NodeCancelRequested = z.infer<typeof NodeCancelRequestedPayload>;

export function defineWorkflowCancelEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideCommand,
      type: "workflow.cancel.requested",
      description:
        "Cancel a run (sent by an operator; aggregate dag_run/<run_id>, version 0): it ends CANCELLED and the agents of its running nodes are told to drop their work.",
      payload: WorkflowCancelRequestedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "workflow.cancelled",
      description:
        "The run was cancelled by an operator: every node that had not ended is CANCELLED; the result holds what it produced so far, with who asked and why.",
      payload: WorkflowCancelledPayload,
    }),
  ] as const;
}
