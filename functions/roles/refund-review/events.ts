import * as z from "../../../schemas/zod";
import {
  AgentDecisionRequestedPayload,
  AgentStepRequestedPayload,
  defineEventType,
  OpaqueId,
  OutputGuardRecord,
  outsideCommand,
  type PayloadTypes,
  streamCommand,
  streamFact,
  ToolCallId,
  ToolName,
} from "../../kit";
import { OrderId, RefundReviewOutcome, SupportTurn } from "../customer-support/events/index";

/**
 * The refund review (seed 000 §2.2, §6.2, §10): a customer asks about a refund; the refund agent,
 * an agent that loops over its tools (functions/core/agent), looks up the order and its refund,
 * issues the refund when the order allows it (with a person's approval above an amount), and
 * reports what it decided.
 *
 * - `refund.review.requested` (command): review one customer's refund question; the agent run is
 *   `agent_run/refund-review:<task_id>`.
 * - `refund_review.step.requested` (command, the run's own stream): take the run's next step;
 *   it says what the step before it did (a model turn with its `model_run_id`, or a tool call with
 *   its `tool_call_id`), so the trace shows every turn and call under the task.
 * - `refund_review.decision.requested` (operator command): a person's answer to what the run waits
 *   for: approve or reject a call that needs approval, say whether a write whose outcome could
 *   not be learnt was applied, or give the answer of a run handed over for good.
 * - `refund.approved` (fact): a refund was made, committed with the step that learnt it, whatever
 *   becomes of the run; `refund.review.completed` and `refund.rejected` (facts): what the review
 *   decided; `refund.review.needs_person`: the run waits for a person.
 */

export const REFUND_REVIEW_REQUESTED = "refund.review.requested";
export const REFUND_REVIEW_STEP = "refund_review.step.requested";
export const REFUND_REVIEW_DECISION = "refund_review.decision.requested";
export const REFUND_REVIEW_COMPLETED = "refund.review.completed";
export const REFUND_REVIEW_NEEDS_PERSON = "refund.review.needs_person";
export const REFUND_APPROVED = "refund.approved";
export const REFUND_REJECTED = "refund.rejected";

/** An amount in cents (as the orders table keeps totals). */
const AmountCents = z.int().check(z.nonnegative(), z.lte(100_000_000));
const RefundId = z.string().check(z.minLength(1), z.maxLength(128));
const Reason = z.string().check(z.minLength(1), z.maxLength(2000));

/**
 * A support turn the router found to be a refund question: the turn (who, where the reply goes,
 * which context: the agent reads the customer's messages from the conversation) and the order.
 */
export const RefundReviewRequestedPayload = z.extend(SupportTurn, {
  intent: z.literal("refund"),
  order_id: OrderId,
});
export type RefundReviewRequested = z.output<typeof RefundReviewRequestedPayload>;

export const RefundReviewCompletedPayload = z.object({
  run_id: OpaqueId,
  conversation_id: OpaqueId,
  order_id: OrderId,
  ...RefundReviewOutcome.shape,
  model_turns: z.int().check(z.nonnegative()),
  tool_calls: z.int().check(z.nonnegative()),
  /**
   * The output guard's record of `reason` (./reason-guard.ts), which carries the reason as the
   * guard left it; absent in a review completed before reasons were guarded.
   */
  output_guard: z.optional(OutputGuardRecord),
});
export type RefundReviewCompleted = z.output<typeof RefundReviewCompletedPayload>;

export const RefundApprovedPayload = z.object({
  order_id: OrderId,
  conversation_id: OpaqueId,
  amount_cents: AmountCents,
  refund_id: RefundId,
});
export const RefundRejectedPayload = z.object({
  order_id: OrderId,
  conversation_id: OpaqueId,
  reason: Reason,
});

export const RefundReviewNeedsPersonPayload = z.object({
  run_id: OpaqueId,
  conversation_id: OpaqueId,
  order_id: OrderId,
  waiting: z.enum(["approval", "outcome", "answer"]),
  tool_call_id: z.optional(ToolCallId),
  tool: z.optional(ToolName),
  reason: z.string().check(z.maxLength(4096)),
});

/**
 * The refund review's event types, defined once, in this order, when this file is first imported;
 * the role modules of the customer-support application that use them list them in their `events`.
 */
export const REFUND_EVENT_TYPES = [
  defineEventType({
    ...streamCommand,
    type: REFUND_REVIEW_REQUESTED,
    description:
      "Review a customer's refund question (the refund agent; its run is agent_run/refund-review:<task_id>).",
    payload: RefundReviewRequestedPayload,
  }),
  defineEventType({
    ...streamCommand,
    type: REFUND_REVIEW_STEP,
    description:
      "The refund agent's run takes its next step (on the run's own stream); says what the step before did.",
    payload: AgentStepRequestedPayload,
  }),
  defineEventType({
    ...outsideCommand,
    type: REFUND_REVIEW_DECISION,
    description:
      "A person answers what a refund agent run waits for: approve or reject a call, say whether a write was applied, or give the answer of a run handed over (aggregate agent_run/<run_id>, version 0).",
    payload: AgentDecisionRequestedPayload,
  }),
  defineEventType({
    ...streamFact,
    type: REFUND_REVIEW_COMPLETED,
    description: "The refund agent decided a refund question: approved (refunded) or rejected.",
    payload: RefundReviewCompletedPayload,
  }),
  defineEventType({
    ...streamFact,
    type: REFUND_APPROVED,
    description: "A refund was issued at the payment system (its order is cancelled).",
    payload: RefundApprovedPayload,
  }),
  defineEventType({
    ...streamFact,
    type: REFUND_REJECTED,
    description: "A refund was refused; the reason is what the customer is told.",
    payload: RefundRejectedPayload,
    personal: ["reason"],
  }),
  defineEventType({
    ...streamFact,
    type: REFUND_REVIEW_NEEDS_PERSON,
    description:
      "A refund agent run waits for a person: an approval, a write whose outcome is unknown, or a spent budget.",
    payload: RefundReviewNeedsPersonPayload,
    personal: ["reason"],
  }),
] as const;

declare module "../../kit" {
  interface EventPayloads extends PayloadTypes<(typeof REFUND_EVENT_TYPES)[number]> {}
}
