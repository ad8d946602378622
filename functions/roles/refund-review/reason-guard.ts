import type { AgentJournal, OutputGuardResult } from "../../kit";
import { guardOutput, toolOutputsSeen } from "../../kit";
import type { RefundReviewOutcome } from "../customer-support/events/commands";
import type { RefundReviewRequested } from "./events";
import { customerMessagesOf } from "./prompt";

/**
 * The output guard (functions/core/output-guard.ts) on the refund review's reason, which the
 * customer is told, with what the run knows:
 * - internal: the run's, task's and correlation ids, the conversation's and the customer's, the
 *   customer message's event id;
 * - the reason may name the order reviewed and the refund the answer reports (`refund_id`);
 * - the customer's own messages of the turn are theirs to have back (as the run's first message
 *   gave them to the model: ./prompt.ts);
 * - the tool outputs the model saw in the run (`toolOutputsSeen`).
 * Both come from the texts of the run's conversation (the kit's RunConversation: those the final
 * model step read, when the model's answer ended the run).
 * The tools see only the run's customer's orders, so nothing is known of other customers: their
 * e-mail addresses, phones and order ids are found by shape.
 */

export interface GuardedOutcome {
  /** The outcome with its reason as the guard left it. */
  readonly outcome: RefundReviewOutcome;
  readonly guard: OutputGuardResult;
}

/** The most a reason may hold (RefundReviewOutcome's `reason`), placeholders included. */
const REASON_LIMIT = 2000;

/** The outcome guarded, given the texts of the run's conversation, oldest first. */
export function guardedOutcome(
  journal: AgentJournal,
  outcome: RefundReviewOutcome,
  conversation: readonly string[],
): GuardedOutcome {
  const request = journal.started_by.payload as RefundReviewRequested;
  const guard = guardOutput(outcome.reason, {
    internalIds: [
      journal.run_id,
      journal.task_id,
      journal.correlation_id,
      request.conversation_id,
      request.customer_id,
      request.message_event_id,
    ],
    mayName: [request.order_id, ...(outcome.refund_id === undefined ? [] : [outcome.refund_id])],
    customerWrote: customerMessagesOf(conversation[0]),
    toolOutputs: toolOutputsSeen(conversation),
  });
  const reason =
    guard.redacted.length <= REASON_LIMIT
      ? guard.redacted
      : `${guard.redacted.slice(0, REASON_LIMIT - 1)}…`;
  return { outcome: { ...outcome, reason }, guard };
}
