import type { LocalScript } from "../../functions/adapters/local-model";
import type { AgentJournal } from "../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../functions/core/agent/agent-role";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import type { ModelPort } from "../../functions/core/model";
import { defineModule } from "../../functions/core/role-module";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { ordersFrom } from "../../functions/roles/customer-support/integrations/orders/memory";
import { SAMPLE_ORDERS } from "../../functions/roles/customer-support/integrations/orders/sample-orders";
import { LocalPayments } from "../../functions/roles/customer-support/integrations/payments/memory";
import {
  DEFAULT_REFUND_SETTINGS,
  type RefundAgentSettings,
  refundReviewRole,
  refundRunId,
} from "../../functions/roles/refund-review/refund-agent";
import { testRole } from "../../lib/dev/role-kit/test-role";
import type { Envelope } from "../../schemas";
import { referenceLocalModel } from "../support/reference";

/**
 * The refund agent on in-memory ports through the real pipeline (lib/dev/role-kit), with a
 * payment stand-in that can fail and a model that follows the local script or the test's own.
 */

export const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
/** The turn of the customer's newer message, once they write again. */
export const NEWER_TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W4Z";
export const RUN = refundRunId(TASK);
export const CONVERSATION = "conv_01KB0Q3V9X7T2M4N6P8R0S1W3Z";

/** The refund agent on in-memory ports, a payment stand-in that can fail, and a way to drive it. */
export function refundDesk(
  settings: Partial<RefundAgentSettings> = {},
  /** The model's script for the agent, or a model port of the test's own. */
  script?: LocalScript | ModelPort,
) {
  const desk = deskPorts(script);
  const role = refundReviewRole(desk.ports, { ...DEFAULT_REFUND_SETTINGS, ...settings });
  const module = defineModule({
    descriptor: role,
    entry: "none",
    deployment: {},
    build: () => role,
  });
  const t = testRole(module);
  const { ports: _ports, questions, ...kept } = desk;
  return { t, ...kept, ...deskDrivers(t, questions) };
}

/** The agent's ports: in memory, the conversation's state at the version the test sets. */
function deskPorts(script?: LocalScript | ModelPort) {
  const payments = new LocalPayments();
  const model = referenceLocalModel(
    typeof script === "function" ? { scripts: { "refund-review": script } } : {},
  );
  const content = new InMemoryContentStore();
  const sideEffects = new InMemorySideEffects();
  const orders = ordersFrom(SAMPLE_ORDERS);
  const questions = new Map<number, string>();
  /** The customer's message of the turn at this context version (the conversation's state). */
  const conversation = async (_conversationId: string, version: number) => [
    {
      version,
      message_event_id: "01KB0Q3V9X7T2M4N6P8R0S1W40",
      text: questions.get(version) ?? "",
      received_at: "2026-01-01T00:00:00.000Z",
    },
  ];
  /** The conversation's current version: 1, the refund question, until the customer writes again. */
  let conversationVersion = 1;
  const ports = {
    conversation,
    conversationNow: async () => ({
      version: conversationVersion,
      newestTask: conversationVersion === 1 ? TASK : NEWER_TASK,
      context: () => [],
    }),
    model: typeof script === "object" ? script : model,
    content,
    sideEffects,
    orders,
    payments,
  };
  return {
    ports,
    questions,
    payments,
    model,
    content,
    sideEffects,
    orders,
    /** A newer customer message: the conversation moves past the turn's version. */
    customerWritesAgain: () => {
      conversationVersion += 1;
    },
  };
}

type RoleUnderTest = ReturnType<typeof testRole>;

/** The router's refund question for this order, as its payload. */
function refundQuestion(orderId: string, customer?: string) {
  return {
    conversation_id: CONVERSATION,
    customer_id:
      customer ?? SAMPLE_ORDERS.find((o) => o.order_id === orderId)?.customer_id ?? "cust_alice",
    channel: "chat",
    message_event_id: "01KB0Q3V9X7T2M4N6P8R0S1W40",
    context_version: 1,
    intent: "refund" as const,
    order_id: orderId,
  };
}

/** What a test does to the agent: ask, cancel, deliver its steps, decide; and what it reads. */
function deskDrivers(t: RoleUnderTest, questions: Map<number, string>) {
  const delivered = new Set<string>();
  /** The router's refund question on its stream, not delivered yet. */
  const requested = async (orderId: string, question: string, customer?: string) => {
    questions.set(1, question);
    const [start] = await t.append(
      { aggregate: { type: "support_route", id: TASK }, taskId: TASK, orderKey: CONVERSATION },
      {
        type: "refund.review.requested",
        payload: refundQuestion(orderId, customer),
        inputVersion: 1,
      },
    );
    return start as Envelope;
  };
  const ask = async (orderId: string, question: string, customer?: string, tenant?: string) => {
    const start = await requested(orderId, question, customer);
    return t.deliver(tenant ? { ...start, tenant_id: tenant } : start);
  };
  /** The turn's cancel (`agentbus reply cancel`), as the sender and the refund agent get it. */
  const cancel = (reason = "the customer called in") =>
    t.deliver(
      t.message(
        "support.cancel.requested",
        { conversation_id: CONVERSATION, requested_by: "ops_anna", reason },
        {
          aggregate: { type: "delivery", id: TASK },
          taskId: TASK,
          orderKey: CONVERSATION,
          conversationId: CONVERSATION,
        },
      ),
    );
  /** The step commands not delivered yet, oldest first. */
  const nextSteps = () =>
    t.emitted.filter(
      (e) => e.event_type === "refund_review.step.requested" && !delivered.has(e.event_id),
    );
  /** Deliver step commands until none is left (or `limit`); each counts as delivered once. */
  const drain = async (limit = 100) => {
    for (let i = 0; i < limit; i++) {
      const [next] = nextSteps();
      if (!next) return;
      await t.deliver(next);
      delivered.add(next.event_id);
    }
  };
  const journal = () => t.state<AgentJournal>({ type: AGENT_RUN_AGGREGATE, id: RUN });
  const facts = (type: string) => t.emitted.filter((e) => e.event_type === type);
  const decide = (payload: Record<string, unknown>) =>
    t.deliver(
      t.message(
        "refund_review.decision.requested",
        { run_id: RUN, requested_by: "ops@example.com", ...payload } as never,
        { aggregate: { type: AGENT_RUN_AGGREGATE, id: RUN }, taskId: TASK },
      ),
    );
  return { requested, ask, cancel, nextSteps, drain, journal, facts, delivered, decide };
}
