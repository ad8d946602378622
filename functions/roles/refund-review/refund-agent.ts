import type { Envelope } from "../../../schemas";
import {
  REFUND_APPROVED,
  REFUND_REJECTED,
  REFUND_REVIEW_COMPLETED,
  REFUND_REVIEW_DECISION,
  REFUND_REVIEW_NEEDS_PERSON,
  REFUND_REVIEW_REQUESTED,
  REFUND_REVIEW_STEP,
  RefundReviewRequestedPayload,
} from "../../../schemas/events/refund";
import * as z from "../../../schemas/zod";
import { type AgentJournal, defineAgent } from "../../core/agent/agent";
import { agentDescriptor, agentRole } from "../../core/agent/agent-role";
import type { ContentStore } from "../../core/agent/content";
import type { EmitSpec } from "../../core/emit";
import type { ModelPort } from "../../core/model";
import type { PaymentsPort } from "../../core/payments";
import type { Role } from "../../core/role";
import type { OrdersPort } from "../../core/role-module";
import type { SideEffectStore } from "../../core/side-effects";
import {
  getOrderTool,
  getRefundStatusTool,
  type IssueRefundOptions,
  issueRefundTool,
} from "./tools";

/**
 * The refund agent (seed 000 §10): consumer group `refund-review`. It takes
 * `refund.review.requested`, runs an agent loop over its tools (functions/core/agent) and reports
 * `refund.review.completed` with `refund.approved` or `refund.rejected`, on the run's stream
 * `agent_run/rrun_<task token>` with order key = the conversation id. An answer that says a
 * refund was made is accepted only when the payment system has one for the order (the model's
 * word is not the payment's confirmation, seed 000 §3.2).
 */

export const REFUND_REVIEW_GROUP = "refund-review";

/** The refund agent outside its handler: its group, what it takes, one state per run. */
export const REFUND_REVIEW = agentDescriptor({
  group: REFUND_REVIEW_GROUP,
  types: {
    start: REFUND_REVIEW_REQUESTED,
    step: REFUND_REVIEW_STEP,
    decision: REFUND_REVIEW_DECISION,
  },
  runOf: (event) => refundRunId(event.task_id),
});

export const RefundAnswer = z.object({
  decision: z.enum(["approved", "rejected"]),
  /** What the customer is told, in a sentence or two. */
  reason: z.string().check(z.minLength(1), z.maxLength(2000)),
  amount_cents: z.optional(z.int().check(z.nonnegative())),
  refund_id: z.optional(z.string().check(z.maxLength(128))),
});
export type RefundAnswer = z.output<typeof RefundAnswer>;

export const REFUND_INSTRUCTIONS = [
  "You review a customer's refund question for one order.",
  "Look the order up with get_order and its refund with get_refund_status before you decide.",
  "Issue a refund with issue_refund only when the order is delivered, returned, placed or cancelled and has not been refunded; never for an order in transit (shipped).",
  'Answer with one JSON object: {"decision": "approved" | "rejected", "reason": "...", "amount_cents"?: n, "refund_id"?: "..."}.',
  "Say approved only when issue_refund succeeded (give its refund_id) or the order was already refunded.",
].join(" ");

export interface RefundAgentPorts {
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

/** The run of a review: one per task (`rrun_<task token>`). */
export function refundRunId(taskId: string): string {
  return `rrun_${taskId.slice(taskId.indexOf("_") + 1)}`;
}

export function refundAgent(ports: RefundAgentPorts, settings: RefundAgentSettings) {
  return defineAgent({
    name: REFUND_REVIEW_GROUP,
    instructions: REFUND_INSTRUCTIONS,
    tools: [
      getOrderTool(ports.orders),
      getRefundStatusTool(ports.payments),
      issueRefundTool(ports.orders, ports.payments, settings),
    ],
    output: RefundAnswer,
    maxTurns: settings.maxTurns,
    async accept(answer, journal) {
      if (answer.decision !== "approved") return undefined;
      const refund = await ports.payments.refundOf(journal.subject.order_id ?? "");
      if (!refund)
        return "you answered approved, but the payment system has no refund for this order. Issue it with issue_refund, or answer rejected.";
      if (answer.refund_id !== refund.refund_id || answer.amount_cents !== refund.amount_cents)
        return `the payment system's refund of this order is ${refund.refund_id} for ${refund.amount_cents} cents: answer with those.`;
      return undefined;
    },
  });
}

export function refundReviewRole(
  ports: RefundAgentPorts,
  settings: RefundAgentSettings = DEFAULT_REFUND_SETTINGS,
): Role<AgentJournal> {
  return agentRole({
    descriptor: REFUND_REVIEW,
    agent: refundAgent(ports, settings),
    begin: (event: Envelope) => {
      const request = RefundReviewRequestedPayload.parse(event.payload);
      return {
        prompt: JSON.stringify({ refund_question: request }),
        subject: {
          order_id: request.order_id,
          conversation_id: request.conversation_id,
          customer_id: request.customer_id,
        },
      };
    },
    finish: (journal) => reviewFacts(journal, ports),
    needsPerson: (journal) => [
      {
        type: REFUND_REVIEW_NEEDS_PERSON,
        orderKey: journal.subject.conversation_id,
        runId: journal.run_id,
        payload: {
          run_id: journal.run_id,
          conversation_id: journal.subject.conversation_id,
          order_id: journal.subject.order_id,
          waiting: journal.waiting?.kind ?? "answer",
          ...(journal.waiting?.tool_call_id ? { tool_call_id: journal.waiting.tool_call_id } : {}),
          ...(journal.waiting?.tool ? { tool: journal.waiting.tool } : {}),
          reason: (journal.waiting?.reason ?? journal.failure?.message ?? "").slice(0, 4096),
        },
      },
    ],
    ports,
  });
}

/** `refund.review.completed` and `refund.approved` | `refund.rejected` for an ended run. */
function reviewFacts(journal: AgentJournal, _ports: RefundAgentPorts): EmitSpec[] {
  const { order_id = "", conversation_id = "" } = journal.subject;
  const answer: RefundAnswer =
    journal.status === "COMPLETED"
      ? RefundAnswer.parse(journal.output)
      : { decision: "rejected", reason: journal.failure?.message ?? "the review did not finish" };
  const common = { orderKey: conversation_id, runId: journal.run_id };
  const approved = answer.decision === "approved" && answer.refund_id !== undefined;
  const decision = approved ? ("approved" as const) : ("rejected" as const);
  return [
    {
      type: REFUND_REVIEW_COMPLETED,
      ...common,
      payload: {
        run_id: journal.run_id,
        conversation_id,
        order_id,
        decision,
        reason: answer.reason,
        ...(answer.amount_cents !== undefined ? { amount_cents: answer.amount_cents } : {}),
        ...(approved ? { refund_id: answer.refund_id } : {}),
        model_turns: journal.totals.model_turns,
        tool_calls: journal.totals.tool_calls,
      },
    },
    approved
      ? {
          type: REFUND_APPROVED,
          ...common,
          payload: {
            order_id,
            conversation_id,
            amount_cents: answer.amount_cents ?? 0,
            refund_id: answer.refund_id,
          },
        }
      : {
          type: REFUND_REJECTED,
          ...common,
          payload: { order_id, conversation_id, reason: answer.reason },
        },
  ];
}
