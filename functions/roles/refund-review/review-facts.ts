import type { RefundReviewRequested } from "../../../schemas/events/refund";
import {
  REFUND_APPROVED,
  REFUND_REJECTED,
  REFUND_REVIEW_COMPLETED,
  REFUND_REVIEW_NEEDS_PERSON,
} from "../../../schemas/events/refund";
import type { RefundReviewOutcome } from "../../../schemas/events/support-commands";
import type { AgentJournal } from "../../core/agent/agent";
import type { EmitSpec } from "../../core/emit";
import type { OrdersPort } from "../../core/role-module";

/**
 * What a refund review reports. When it ends: `refund.review.completed`, then `refund.approved`
 * or `refund.rejected` (nothing more for an `answered` question), and the reply request that tells
 * the customer (`reply.generation.requested` with the order as it is now and the review's
 * outcome). When it waits for a person: `refund.review.needs_person`; a review handed over for
 * good (its budget spent) also asks for a reply saying that a person will get back to the
 * customer, so no question goes unanswered.
 */

/** What a person's hand-over tells the customer. */
export const HANDED_OVER_REASON =
  "A member of our team will look at your refund and get back to you.";

/** The facts of a review that ended, and the reply request. */
export async function reviewEnded(journal: AgentJournal, orders: OrdersPort): Promise<EmitSpec[]> {
  const outcome: RefundReviewOutcome =
    journal.status === "COMPLETED"
      ? (journal.output as RefundReviewOutcome)
      : { decision: "rejected", reason: journal.failure?.message ?? "the review did not finish" };
  const { order_id = "", conversation_id = "" } = journal.subject;
  const common = { orderKey: conversation_id, runId: journal.run_id };
  const decided =
    outcome.decision === "approved"
      ? {
          type: REFUND_APPROVED,
          ...common,
          payload: {
            order_id,
            conversation_id,
            amount_cents: outcome.amount_cents ?? 0,
            refund_id: outcome.refund_id,
          },
        }
      : outcome.decision === "rejected"
        ? {
            type: REFUND_REJECTED,
            ...common,
            payload: { order_id, conversation_id, reason: outcome.reason },
          }
        : undefined;
  return [
    {
      type: REFUND_REVIEW_COMPLETED,
      ...common,
      payload: {
        run_id: journal.run_id,
        conversation_id,
        order_id,
        ...outcome,
        model_turns: journal.totals.model_turns,
        tool_calls: journal.totals.tool_calls,
      },
    },
    ...(decided ? [decided] : []),
    await replyRequest(journal, outcome, orders),
  ];
}

/** The fact that a review waits for a person; a hand-over for good also tells the customer. */
export async function reviewWaits(journal: AgentJournal, orders: OrdersPort): Promise<EmitSpec[]> {
  const { order_id = "", conversation_id = "" } = journal.subject;
  const waiting = journal.waiting;
  const fact: EmitSpec = {
    type: REFUND_REVIEW_NEEDS_PERSON,
    orderKey: conversation_id,
    runId: journal.run_id,
    payload: {
      run_id: journal.run_id,
      conversation_id,
      order_id,
      waiting: waiting?.kind ?? "answer",
      ...(waiting?.tool_call_id ? { tool_call_id: waiting.tool_call_id } : {}),
      ...(waiting?.tool ? { tool: waiting.tool } : {}),
      reason: (waiting?.reason ?? journal.failure?.message ?? "").slice(0, 4096),
    },
  };
  if (waiting?.kind !== "answer") return [fact];
  const handedOver: RefundReviewOutcome = { decision: "answered", reason: HANDED_OVER_REASON };
  return [fact, await replyRequest(journal, handedOver, orders)];
}

/** Reply generation's command for the review's turn: the order as it is now, and the outcome. */
async function replyRequest(
  journal: AgentJournal,
  outcome: RefundReviewOutcome,
  orders: OrdersPort,
): Promise<EmitSpec> {
  const request = journal.started_by.payload as RefundReviewRequested;
  const order = await orders.get(request.order_id);
  const own = order !== undefined && order.customer_id === request.customer_id ? order : undefined;
  return {
    type: "reply.generation.requested",
    orderKey: request.conversation_id,
    conversationId: request.conversation_id,
    inputVersion: journal.started_by.input_version,
    runId: journal.run_id,
    payload: {
      ...request,
      ...(own ? { order: own } : {}),
      refund_review: outcome,
    },
  };
}
