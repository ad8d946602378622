import { IsoTime } from "../envelope";
import { OpaqueId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { Generation, NodeId, OperatorReason, Requester } from "./fields";
import { streamCommand, streamFact } from "./kinds";
import { NodeErrorResult } from "./workflow";
import { NODE_CANCEL_REASONS } from "./workflow-cancel";

/**
 * Child runs: a node of a run (the parent) that runs another workflow. The orchestrator is both
 * ends of each message.
 *
 * - `workflow.child.start.requested`: on the parent's stream, addressed to the child run (its
 *   `run_id`, deterministic per assignment of the node; order key = the child's run id): start it
 *   with this workflow and request, knowing its parent. A start for a child run that exists
 *   changes nothing.
 * - `workflow.child.cancel.requested`: on the parent's stream, the child's assignment no longer
 *   counts (the parent was cancelled, the node re-run, ...): cancel the child run.
 * - `workflow.child.ended`: on the child's stream, addressed to the parent (`run_id` is the
 *   parent's, order key too, so it is ordered with the parent's other events): how the child
 *   ended, or why it was refused before it ran.
 * - `workflow.child.approval.requested`: on the child's stream, addressed to the parent like its
 *   end: the child's plan names roles that write, so it runs only once a person approves it; the
 *   parent's node waits for that approval, showing the plan. The start sent again after the
 *   approval carries it (`approval`).
 */

/** A definition's name follows the language's identifier rule, as a node id does. */
const DefinitionName = NodeId;

/** Who a child run's parent is: the run, the child node, and its assignment's generation. */
export const ParentRefShape = {
  parent_run_id: OpaqueId,
  parent_node_id: NodeId,
  parent_generation: Generation,
};

export const WorkflowChildStartRequestedPayload = z.object({
  /** The child run. */
  run_id: OpaqueId,
  ...ParentRefShape,
  /** The workflow to run by name (a compiled-in or registered one), ... */
  workflow_name: z.optional(DefinitionName),
  workflow_version: z.optional(z.int().check(z.positive())),
  /** ... or a plan: a definition an upstream of the node produced, checked before it runs. */
  plan: z.optional(z.unknown()),
  /** The plan's size in bytes of JSON when it was too large to send (it is then refused). */
  plan_bytes: z.optional(z.int().check(z.positive())),
  /** The child's input: the parent's input with the node's input over it. */
  request: z.record(z.string(), z.unknown()),
  /** A person approved the plan (it names roles that write): who, when, and what they noted. */
  approval: z.optional(z.object({ by: Requester, at: IsoTime, note: z.optional(OperatorReason) })),
});
export type WorkflowChildStartRequested = z.infer<typeof WorkflowChildStartRequestedPayload>;

/** Why a child run is cancelled: why its node's assignment no longer counts. */
export const CHILD_CANCEL_REASONS = [...NODE_CANCEL_REASONS, "first_wins"] as const;
export const WorkflowChildCancelRequestedPayload = z.object({
  /** The child run. */
  run_id: OpaqueId,
  parent_run_id: OpaqueId,
  reason: z.enum(CHILD_CANCEL_REASONS),
});
export type WorkflowChildCancelRequested = z.infer<typeof WorkflowChildCancelRequestedPayload>;

export const WorkflowChildEndedPayload = z.object({
  /** The parent run, whose node the child ran for. */
  run_id: OpaqueId,
  node_id: NodeId,
  generation: Generation,
  child_run_id: OpaqueId,
  status: z.enum(["COMPLETED", "PARTIAL", "FAILED", "CANCELLED"]),
  /** The child's outputs by node id (its run's result). */
  outputs: z.optional(z.record(z.string(), z.unknown())),
  /** Why the child was refused before it ran (status FAILED). */
  error: z.optional(NodeErrorResult),
});
export type WorkflowChildEnded = z.infer<typeof WorkflowChildEndedPayload>;

/** The most nodes of a plan an approval request lists (it says how many there are). */
export const MAX_APPROVAL_NODES = 100;

/** A node of a plan as a person is shown it: its id, and what carries it out in words. */
export const PlanNodeSummary = z.object({
  id: NodeId,
  /** Its role (`map <role>` for a map node), `wait`, or `plan` for a child plan of its own. */
  runs: z.string().check(z.minLength(1), z.maxLength(200)),
});

/** A role a plan names that writes, with the write integrations its module uses. */
export const PlanWriter = z.object({
  role: z.string().check(z.minLength(1), z.maxLength(200)),
  integrations: z.array(z.string().check(z.minLength(1), z.maxLength(200))),
});

export const WorkflowChildApprovalRequestedPayload = z.object({
  /** The parent run, whose node the child would run for. */
  run_id: OpaqueId,
  node_id: NodeId,
  generation: Generation,
  child_run_id: OpaqueId,
  /** The plan, checked, as a person is shown it: its name, version and nodes. */
  plan: z.object({
    name: NodeId,
    version: z.int().check(z.positive()),
    nodes: z.array(PlanNodeSummary).check(z.maxLength(MAX_APPROVAL_NODES)),
    node_count: z.int().check(z.positive()),
  }),
  /** The roles it names that write. */
  writes: z.array(PlanWriter).check(z.minLength(1)),
});
export type WorkflowChildApprovalRequested = z.infer<typeof WorkflowChildApprovalRequestedPayload>;

export function defineWorkflowChildEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...streamCommand,
      type: "workflow.child.start.requested",
      description:
        "A run's child node asks for its child run (on the parent's dag_run stream, order key = the child's run id): start it with this workflow (by name, or a plan an upstream produced) and request.",
      payload: WorkflowChildStartRequestedPayload,
    }),
    registry.define({
      ...streamCommand,
      type: "workflow.child.cancel.requested",
      description:
        "A child node's assignment no longer counts (its run cancelled, the node re-run or reset): cancel its child run and that run's own children (on the parent's dag_run stream).",
      payload: WorkflowChildCancelRequestedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "workflow.child.ended",
      description:
        "A child run ended, or was refused before it ran: told to its parent run (on the child's dag_run stream, order key = the parent's run id), whose child node ends as it ended.",
      payload: WorkflowChildEndedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "workflow.child.approval.requested",
      description:
        "A child run's plan names roles that write, so it waits for a person's approval: told to its parent run (on the child's dag_run stream, order key = the parent's run id), whose child node waits, showing the plan, until approved, rejected or past its deadline.",
      payload: WorkflowChildApprovalRequestedPayload,
    }),
  ] as const;
}
