import type { ContentStore, Envelope, ModelPort, Role, SideEffectStore } from "../../kit";
import {
  type AgentDefinition,
  type AgentJournal,
  agentDescriptor,
  agentModelSchemas,
  agentRole,
  defineAgent,
} from "../../kit";
import type {
  ConversationContextReader,
  ConversationReader,
} from "../customer-support/conversation/conversation";
import { SUPPORT_CANCEL_REQUESTED } from "../customer-support/events/cancel";
import { RefundReviewOutcome } from "../customer-support/events/commands";
import { SUPPORT_SUPERSEDED } from "../customer-support/events/superseded";
import type { OrdersPort } from "../customer-support/integrations/orders/port";
import type { PaymentsPort } from "../customer-support/integrations/payments/port";
import { supersededDecision } from "../customer-support/superseded";
import {
  REFUND_APPROVED,
  REFUND_REJECTED,
  REFUND_REVIEW_COMPLETED,
  REFUND_REVIEW_DECISION,
  REFUND_REVIEW_NEEDS_PERSON,
  REFUND_REVIEW_REQUESTED,
  REFUND_REVIEW_STEP,
  type RefundReviewRequested,
  RefundReviewRequestedPayload,
} from "./events";
import { refundRunId } from "./ids";

export { refundRunId };

import modelSchemas from "./model-schemas.json";
import { refundPrompt } from "./prompt";
import { refundMade, reviewEnded, reviewWaits } from "./review-facts";
import {
  getOrderTool,
  getRefundStatusTool,
  type IssueRefundOptions,
  issueRefundTool,
  REFUND_TOOL_INPUTS,
} from "./tools";

/**
 * The refund agent (seed 000 §10): consumer group `refund-review`. It takes
 * `refund.review.requested` from the router (a customer's refund question about an order), runs
 * an agent loop over its tools (functions/core/agent) and reports each refund it makes
 * (`refund.approved`, as the refund is made), then `refund.review.completed` with
 * `refund.rejected` for a refusal, and asks reply generation to tell the customer
 * (./review-facts), on the run's stream
 * `agent_run/rrun_<task token>` with order key = the conversation id. An answer that says a
 * refund was made is accepted only when the payment system has one for the order (the model's
 * word is not the payment's confirmation, seed 000 §3.2), and one that refuses it only when it
 * has none. A review whose turn was cancelled
 * (`support.cancel.requested`, which it takes too) or superseded by a newer customer message
 * refunds nothing more: its run ends CANCELLED at its next step (functions/core/agent/stop.ts).
 */

export const REFUND_REVIEW_GROUP = "refund-review";

/** The refund agent outside its handler: its group, what it takes, one state per run. */
export const REFUND_REVIEW = agentDescriptor({
  group: REFUND_REVIEW_GROUP,
  types: {
    start: REFUND_REVIEW_REQUESTED,
    step: REFUND_REVIEW_STEP,
    decision: REFUND_REVIEW_DECISION,
    cancel: SUPPORT_CANCEL_REQUESTED,
  },
  runOf: (event) => refundRunId(event.task_id),
  facts: [
    REFUND_REVIEW_COMPLETED,
    REFUND_APPROVED,
    REFUND_REJECTED,
    REFUND_REVIEW_NEEDS_PERSON,
    "reply.generation.requested",
    SUPPORT_SUPERSEDED,
  ],
  runOfTurn: refundRunId,
});

/** The agent's final answer: the review's outcome (`answered`: a question about a refund that exists). */
export const RefundAnswer = RefundReviewOutcome;
export type RefundAnswer = RefundReviewOutcome;

/** What the refund agent shows its model: its tools' inputs and its answer. */
export const REFUND_MODEL_SCHEMAS = agentModelSchemas(REFUND_TOOL_INPUTS, RefundAnswer);

export const REFUND_INSTRUCTIONS = [
  "You review a customer's refund question for one order.",
  "Look the order up with get_order and its refund with get_refund_status before you decide.",
  "Issue a refund with issue_refund only when the order is delivered, returned, placed or cancelled and has not been refunded; never for an order in transit (shipped).",
  "When the order already has a refund (submitted, refunded or rejected by the shop), answer the question about it instead of refunding again.",
  'Answer with one JSON object: {"decision": "approved" | "rejected" | "answered", "reason": "...", "amount_cents"?: n, "refund_id"?: "..."}; the reason is what the customer is told.',
  "Say approved only when the payment system has the refund (give its refund_id and amount).",
].join(" ");

export interface RefundAgentPorts {
  /** The customer's messages of the turn (from the conversation's state). */
  readonly conversation: ConversationContextReader;
  /**
   * The conversation as it is now: its version (a newer message supersedes a turn) and its newest
   * turn (which answers the turns it superseded).
   */
  readonly conversationNow: ConversationReader;
  readonly model: ModelPort;
  readonly content: ContentStore;
  readonly sideEffects: SideEffectStore;
  readonly orders: OrdersPort;
  readonly payments: PaymentsPort;
}

export interface RefundAgentSettings extends IssueRefundOptions {
  readonly maxTurns: number;
}

export const DEFAULT_REFUND_SETTINGS: RefundAgentSettings = {
  approvalAboveCents: 10_000,
  approvalDeadlineSeconds: 24 * 3600,
  maxTurns: 12,
};

export function refundAgent(ports: RefundAgentPorts, settings: RefundAgentSettings) {
  return defineAgent({
    name: REFUND_REVIEW_GROUP,
    instructions: REFUND_INSTRUCTIONS,
    tools: [
      getOrderTool(ports.orders),
      getRefundStatusTool(ports.orders, ports.payments),
      issueRefundTool(ports.orders, ports.payments, settings),
    ],
    output: RefundAnswer,
    schemas: modelSchemas,
    maxTurns: settings.maxTurns,
    async accept(answer, journal) {
      if (answer.decision === "answered") return undefined;
      const refund = await ports.payments.refundOf(journal.subject.order_id ?? "");
      if (answer.decision === "rejected")
        return refund
          ? `you answered rejected, but the payment system has refunded this order (${refund.refund_id} for ${refund.amount_cents} cents): answer approved with those if this review made it, or answered if it was made before.`
          : undefined;
      if (!refund)
        return "you answered approved, but the payment system has no refund for this order. Issue it with issue_refund, or answer rejected.";
      if (answer.refund_id !== refund.refund_id || answer.amount_cents !== refund.amount_cents)
        return `the payment system's refund of this order is ${refund.refund_id} for ${refund.amount_cents} cents: answer with those.`;
      return undefined;
    },
  });
}

/** The refund agent's role: `agent` (its tools and instructions) as refundAgent makes it. */
export function refundReviewRole(
  ports: RefundAgentPorts,
  settings: RefundAgentSettings = DEFAULT_REFUND_SETTINGS,
  agent: AgentDefinition = refundAgent(ports, settings),
): Role<AgentJournal> {
  return agentRole({
    descriptor: REFUND_REVIEW,
    agent,
    async begin(event: Envelope) {
      const request = RefundReviewRequestedPayload.parse(event.payload);
      const messages = await ports.conversation(request.conversation_id, request.context_version);
      return {
        prompt: refundPrompt(
          request.order_id,
          messages.map((m) => m.text),
        ),
        subject: {
          order_id: request.order_id,
          conversation_id: request.conversation_id,
          customer_id: request.customer_id,
        },
      };
    },
    async superseded({ payload, input_version }) {
      if (input_version === undefined) return false;
      const { conversation_id } = payload as RefundReviewRequested;
      return input_version < (await ports.conversationNow(conversation_id)).version;
    },
    // A superseded turn says so (customer-support/superseded.ts): its review gives no answer.
    async stoppedFacts(reason, event, journal) {
      if (reason !== "superseded") return [];
      const conversationId =
        journal?.subject.conversation_id ??
        (event.payload as RefundReviewRequested).conversation_id;
      const now = await ports.conversationNow(conversationId);
      return [...(supersededDecision(event, conversationId, now).emit ?? [])];
    },
    finish: (journal, conversation) => reviewEnded(journal, conversation, ports),
    needsPerson: async (journal) => reviewWaits(journal),
    wrote: async (journal, write) => refundMade(journal, write),
    ports,
  });
}
