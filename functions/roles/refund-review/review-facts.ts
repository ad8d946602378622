import type { AgentJournal, EmitSpec, RunConversation, WriteDone } from "../../kit";
import { currentRunOf, guardRecord, refusalReason } from "../../kit";
import type { RefundReviewOutcome } from "../customer-support/events/commands";
import type { OrdersPort } from "../customer-support/integrations/orders/port";
import type { RefundReceipt } from "../customer-support/integrations/payments/port";
import type { RefundReviewRequested } from "./events";
import {
  REFUND_APPROVED,
  REFUND_REJECTED,
  REFUND_REVIEW_COMPLETED,
  REFUND_REVIEW_NEEDS_PERSON,
} from "./events";
import { type GuardedOutcome, guardedOutcome } from "./reason-guard";
import { ISSUE_REFUND } from "./tools";

/**
 * What a refund review reports. A refund made: `refund.approved`, committed with the step that
 * learnt it (the payment system's receipt), whatever becomes of the run after, so money that
 * moved is always a fact, even in a run later handed to a person. When it ends:
 * `refund.review.completed`, then `refund.rejected` for a refusal, and the reply request that
 * tells the customer (`reply.generation.requested` with the order as it is now and the review's
 * outcome). When it waits for a person: `refund.review.needs_person`; the customer is told once
 * the person has decided (a run handed over for good ends with the answer the person gives).
 *
 * The reason reaches the customer, so every fact of a review that ended carries it as the output
 * guard left it (./reason-guard.ts), and `refund.review.completed` the guard's record. A reason
 * the guard refused asks reply generation to hold the reply for a person (`hold_reason`): the
 * decision stands (the payment system confirmed it), the words go to a person first.
 */

/** What the facts of a review that ended read: the orders (the reply tells the order as it is now). */
export interface ReviewEndPorts {
  readonly orders: OrdersPort;
}

/** The fact of a refund the run made (a write of `issue_refund` that took effect). */
export function refundMade(journal: AgentJournal, write: WriteDone): EmitSpec[] {
  if (write.tool !== ISSUE_REFUND) return [];
  const receipt = write.output as RefundReceipt;
  const { conversation_id = "" } = journal.subject;
  return [
    {
      type: REFUND_APPROVED,
      orderKey: conversation_id,
      runId: currentRunOf(journal),
      payload: {
        order_id: receipt.order_id,
        conversation_id,
        amount_cents: receipt.amount_cents,
        refund_id: receipt.refund_id,
      },
    },
  ];
}

/**
 * The facts of a review that ended, and the reply request; the reason guarded with the run's
 * conversation (what its model saw).
 */
export async function reviewEnded(
  journal: AgentJournal,
  conversation: RunConversation,
  ports: ReviewEndPorts,
): Promise<EmitSpec[]> {
  const answer: RefundReviewOutcome =
    journal.status === "COMPLETED"
      ? (journal.output as RefundReviewOutcome)
      : { decision: "rejected", reason: journal.failure?.message ?? "the review did not finish" };
  const guarded = guardedOutcome(journal, answer, await conversation());
  const { outcome } = guarded;
  const { order_id = "", conversation_id = "" } = journal.subject;
  const common = { orderKey: conversation_id, runId: currentRunOf(journal) };
  const rejected: EmitSpec[] =
    outcome.decision === "rejected"
      ? [
          {
            type: REFUND_REJECTED,
            ...common,
            payload: { order_id, conversation_id, reason: outcome.reason },
          },
        ]
      : [];
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
        output_guard: guardRecord(guarded.guard),
      },
    },
    ...rejected,
    await replyRequest(journal, guarded, ports.orders),
  ];
}

/** The fact that a review waits for a person. */
export function reviewWaits(journal: AgentJournal): EmitSpec[] {
  const { order_id = "", conversation_id = "" } = journal.subject;
  const waiting = journal.waiting;
  return [
    {
      type: REFUND_REVIEW_NEEDS_PERSON,
      orderKey: conversation_id,
      runId: currentRunOf(journal),
      payload: {
        run_id: journal.run_id,
        conversation_id,
        order_id,
        waiting: waiting?.kind ?? "answer",
        ...(waiting?.tool_call_id ? { tool_call_id: waiting.tool_call_id } : {}),
        ...(waiting?.tool ? { tool: waiting.tool } : {}),
        reason: (waiting?.reason ?? journal.failure?.message ?? "").slice(0, 4096),
      },
    },
  ];
}

/** Reply generation's command for the review's turn: the order as it is now, and the outcome. */
async function replyRequest(
  journal: AgentJournal,
  { outcome, guard }: GuardedOutcome,
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
    runId: currentRunOf(journal),
    payload: {
      ...request,
      ...(own ? { order: own } : {}),
      refund_review: outcome,
      ...(guard.verdict === "refuse" ? { hold_reason: refusalReason(guard) } : {}),
    },
  };
}
