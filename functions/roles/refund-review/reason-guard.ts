import type { AgentJournal, ContentStore, OutputGuardResult } from "../../kit";
import { guardOutput, toolOutputsSeen } from "../../kit";
import type { ConversationContextReader } from "../customer-support/conversation/conversation";
import type { RefundReviewOutcome } from "../customer-support/events/commands";
import type { RefundReviewRequested } from "./events";

/**
 * The output guard (functions/core/output-guard.ts) on the refund review's reason, which the
 * customer is told, with what the run knows:
 * - internal: the run's, task's and correlation ids, the conversation's and the customer's, the
 *   customer message's event id;
 * - the reason may name the order reviewed and the refund the answer reports (`refund_id`);
 * - the customer's own messages of the turn are theirs to have back;
 * - the tool outputs the model saw in the run (`toolOutputsSeen`).
 * The tools see only the run's customer's orders, so nothing is known of other customers: their
 * e-mail addresses, phones and order ids are found by shape.
 */

export interface GuardedOutcome {
  /** The outcome with its reason as the guard left it. */
  readonly outcome: RefundReviewOutcome;
  readonly guard: OutputGuardResult;
}

export interface ReasonGuardPorts {
  readonly conversation: ConversationContextReader;
  readonly content: ContentStore;
}

/** The most a reason may hold (RefundReviewOutcome's `reason`), placeholders included. */
const REASON_LIMIT = 2000;

export async function guardedOutcome(
  journal: AgentJournal,
  outcome: RefundReviewOutcome,
  ports: ReasonGuardPorts,
): Promise<GuardedOutcome> {
  const request = journal.started_by.payload as RefundReviewRequested;
  const [messages, toolOutputs] = await Promise.all([
    ports.conversation(request.conversation_id, request.context_version),
    toolOutputsSeen(journal, ports.content),
  ]);
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
    customerWrote: messages.map((m) => m.text),
    toolOutputs,
  });
  const reason =
    guard.redacted.length <= REASON_LIMIT
      ? guard.redacted
      : `${guard.redacted.slice(0, REASON_LIMIT - 1)}…`;
  return { outcome: { ...outcome, reason }, guard };
}
