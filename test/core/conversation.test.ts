import { describe, expect, it } from "vitest";
import { PermanentError, TransientError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import {
  type ConversationState,
  conversation,
  conversationContextReader,
  conversationRole,
  conversationVersionReader,
} from "../../functions/roles/customer-support/conversation/conversation";
import { SAMPLE_ORDERS } from "../../functions/roles/customer-support/integrations/orders/sample-orders";
import { orderLookupRole } from "../../functions/roles/customer-support/order-lookup/order-lookup";
import {
  ROUTER_RULES,
  type RouteState,
  routeMessage,
  routerRole,
} from "../../functions/roles/customer-support/router/router";
import type { Envelope } from "../../schemas";
import { clientMessage, makeDeps } from "./fixtures";
import { newConversationId, only, type SupportHarness, supportHarness } from "./support-fixture";

/**
 * The first steps of the customer-support conversation: the conversation group taking messages
 * in, the router, and order lookup.
 */

/** The support roles but the sender (sends are left unsent), with a model that counts its calls. */
const harness = () => supportHarness({ without: ["sender"] });

describe("conversation (ingress)", () => {
  it("bumps the version per message and emits accepted + route requested on its stream", async () => {
    const { deps, store, clock } = makeDeps();
    const role = conversationRole({ replyTtlSeconds: 60 });
    const conv = newConversationId();
    const first = clientMessage(conv, "Where is my order 123?");
    const second = clientMessage(conv, "  Also, can I get a refund?  ");

    const r1 = await consume(first, role, deps);
    clock.advance(5000);
    const r2 = await consume(second, role, deps);
    expect([r1.status, r2.status]).toEqual(["applied", "applied"]);

    const [accepted1, route1] = r1.steps[0]?.emitted ?? [];
    const [accepted2, route2] = r2.steps[0]?.emitted ?? [];
    expect(accepted1?.event_type).toBe("conversation.message.accepted");
    expect(route1?.event_type).toBe("support.route.requested");
    // One stream: versions 1..4, the conversation's order key, the message's task id.
    expect([accepted1, route1, accepted2, route2].map((e) => e?.aggregate)).toEqual([
      { type: "conversation", id: conv, version: 1 },
      { type: "conversation", id: conv, version: 2 },
      { type: "conversation", id: conv, version: 3 },
      { type: "conversation", id: conv, version: 4 },
    ]);
    for (const e of [accepted1, route1, accepted2, route2]) {
      expect(e?.order_key).toBe(conv);
      expect(e?.conversation_id).toBe(conv);
    }
    expect(route1?.task_id).toBe(first.task_id);
    expect(route2?.task_id).toBe(second.task_id);
    expect(route1?.causation_id).toBe(first.event_id);
    expect([route1?.input_version, route2?.input_version]).toEqual([1, 2]);
    expect(accepted2?.input_version).toBe(2);
    expect(accepted2?.payload).toMatchObject({ version: 2 });
    // The reply deadline: acceptance time + replyTtlSeconds, on the command only.
    expect(route1?.expires_at).toBe("2026-09-01T10:01:00.000Z");
    expect(route2?.expires_at).toBe("2026-09-01T10:01:05.000Z");
    expect(accepted1?.expires_at).toBeUndefined();
    expect(route2?.payload).toEqual({
      conversation_id: conv,
      customer_id: "cust_alice",
      channel: "chat",
      message_event_id: second.event_id,
      context_version: 2,
    });
    // The command names its context; the text is kept once, in the conversation's state.
    expect(JSON.stringify(route2?.payload)).not.toContain("refund");

    const state = (await store.load({ state: { type: "conversation", id: conv } })).state
      ?.data as ConversationState;
    expect(state.version).toBe(2);
    expect(state.customer_id).toBe("cust_alice");
    expect(state.messages.map((m) => [m.version, m.task_id, m.message_event_id])).toEqual([
      [1, first.task_id, first.event_id],
      [2, second.task_id, second.event_id],
    ]);
    const read = conversationVersionReader(store);
    expect(await read(conv)).toBe(2);
    expect(await read(newConversationId())).toBe(0);

    // A redelivered message is a duplicate (inbox) and does not bump the version.
    const again = await consume(first, role, deps);
    expect(again.status).toBe("duplicate");
    expect(await read(conv)).toBe(2);
  });

  it("uses a 300 s reply deadline by default and keeps only the last 50 messages", async () => {
    const { deps, store } = makeDeps();
    const conv = newConversationId();
    let last: Envelope | undefined;
    for (let i = 0; i < 52; i++) {
      const result = await consume(clientMessage(conv, `message ${i}`), conversation, deps);
      last = result.steps[0]?.emitted[1];
    }
    expect(last?.expires_at).toBe("2026-09-01T10:05:00.000Z");
    expect(last?.input_version).toBe(52);
    const state = (await store.load({ state: { type: "conversation", id: conv } })).state
      ?.data as ConversationState;
    expect(state.messages).toHaveLength(50);
    expect(state.messages[0]?.version).toBe(3);
    expect(state.messages.at(-1)?.text).toBe("message 51");
  });

  it("keeps the client's own deadline when it is earlier than the reply deadline", async () => {
    const { deps } = makeDeps();
    const conv = newConversationId();
    const soon = clientMessage(conv, "quick question", {
      overrides: { expires_at: "2026-09-01T10:00:30.000Z" },
    });
    const later = clientMessage(conv, "no hurry", {
      overrides: { expires_at: "2026-09-01T11:00:00.000Z" },
    });
    const first = await consume(soon, conversation, deps);
    const second = await consume(later, conversation, deps);
    expect(first.steps[0]?.emitted[1]?.expires_at).toBe("2026-09-01T10:00:30.000Z");
    expect(second.steps[0]?.emitted[1]?.expires_at).toBe("2026-09-01T10:05:00.000Z");
  });

  it("rejects a message whose conversation id or aggregate does not match", async () => {
    const { deps, store } = makeDeps();
    const conv = newConversationId();
    const other = newConversationId();
    const mismatched = clientMessage(conv, "hi", { overrides: { conversation_id: other } });
    const wrongType = clientMessage(conv, "hi", {
      overrides: { aggregate: { type: "task", id: conv, version: 0 } },
    });
    for (const event of [mismatched, wrongType]) {
      const error = await consume(event, conversation, deps).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PermanentError);
      expect((error as PermanentError).code).toBe("conversation.aggregate_mismatch");
    }
    // Without an envelope conversation_id the aggregate id is the conversation.
    const bare = clientMessage(conv, "hi", { overrides: { conversation_id: undefined } });
    expect((await consume(bare, conversation, deps)).status).toBe("applied");
    expect(await conversationVersionReader(store)(conv)).toBe(1);
  });

  it("rejects a message from another customer on an existing conversation", async () => {
    const { deps, store } = makeDeps();
    const conv = newConversationId();
    await consume(clientMessage(conv, "hi"), conversation, deps);
    const error = await consume(
      clientMessage(conv, "order 123 please", { customer: "cust_bob" }),
      conversation,
      deps,
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "conversation.customer_mismatch" });
    expect(await conversationVersionReader(store)(conv)).toBe(1);
  });

  it("keeps the first message's tenant and rejects another tenant's message", async () => {
    const { deps, store } = makeDeps();
    const conv = newConversationId();
    await consume(
      clientMessage(conv, "hi", { overrides: { tenant_id: "acme" } }),
      conversation,
      deps,
    );
    const stored = await store.load({ state: { type: "conversation", id: conv } });
    expect((stored.state?.data as { tenant_id?: string } | undefined)?.tenant_id).toBe("acme");
    const again = await consume(
      clientMessage(conv, "and again", { overrides: { tenant_id: "acme" } }),
      conversation,
      deps,
    );
    expect(again.status).toBe("applied");
    for (const tenant of ["globex", undefined]) {
      const error = await consume(
        clientMessage(conv, "mine now", { overrides: { tenant_id: tenant } }),
        conversation,
        deps,
      ).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "conversation.tenant_mismatch" });
    }
    expect(await conversationVersionReader(store)(conv)).toBe(2);
  });
});

describe("router", () => {
  const routerOf = (h: SupportHarness) =>
    routerRole({ context: conversationContextReader(h.store) });
  it.each([
    ["Where is my order 123?", "order_status", "123", ROUTER_RULES.orderStatus],
    ["I want a refund for order #A-1001", "refund", "A-1001", ROUTER_RULES.refund],
    ["Order no. 456 - can I get my money back?", "refund", "456", ROUTER_RULES.refund],
    ["my order number is B-2002, status?", "order_status", "B-2002", ROUTER_RULES.orderStatus],
    ["订单 123 什么时候退款？", "refund", "123", ROUTER_RULES.refund],
    ["订单号：A-1001 到哪了", "order_status", "A-1001", ROUTER_RULES.orderStatus],
    ["我的订单789还没到", "order_status", "789", ROUTER_RULES.orderStatus],
    ["What is my order status?", "general", undefined, ROUTER_RULES.general],
    ["I want a refund", "general", undefined, ROUTER_RULES.general],
    ["我要退款", "general", undefined, ROUTER_RULES.general],
    ["Do you ship to Canada? #1 question", "general", undefined, ROUTER_RULES.general],
  ])("routes %j to %s", (text, intent, orderId, rule) => {
    expect(routeMessage(text)).toEqual({
      intent,
      ...(orderId === undefined ? {} : { order_id: orderId }),
      rule,
    });
  });

  it("emits routed + the refund review (a refund question about an order) keeping the envelope fields", async () => {
    const h = harness();
    const router = routerOf(h);
    const conv = newConversationId();
    const message = clientMessage(conv, "Refund for order 123 please");
    const accepted = await consume(message, h.conversation, h.deps);
    const request = accepted.steps[0]?.emitted[1] as Envelope;
    const result = await consume(request, router, h.deps);
    const [routed, lookup] = result.steps[0]?.emitted ?? [];
    expect(routed?.event_type).toBe("support.routed");
    expect(routed?.payload).toEqual({
      conversation_id: conv,
      intent: "refund",
      order_id: "123",
      rule: ROUTER_RULES.refund,
    });
    expect(routed?.expires_at).toBeUndefined();
    expect(lookup?.event_type).toBe("refund.review.requested");
    expect(lookup?.payload).toMatchObject({
      intent: "refund",
      order_id: "123",
      context_version: 1,
    });
    expect(lookup?.payload).not.toHaveProperty("text");
    for (const e of [routed, lookup]) {
      expect(e?.aggregate.type).toBe("support_route");
      expect(e?.aggregate.id).toBe(message.task_id);
      expect(e?.task_id).toBe(message.task_id);
      expect(e?.input_version).toBe(1);
      expect(e?.order_key).toBe(conv);
      expect(e?.conversation_id).toBe(conv);
    }
    expect(lookup?.expires_at).toBe(request.expires_at);

    // A redelivery is a duplicate; a decision on a stored route emits nothing.
    const again = await consume(request, router, h.deps);
    expect(again.status).toBe("duplicate");
    expect(again.steps.flatMap((s) => s.emitted)).toEqual([]);
    const stored = await h.state<RouteState>("support_route", message.task_id);
    expect(stored?.intent).toBe("refund");
    const decision = await router.decide(stored, request, {
      now: h.clock.now(),
      receiveCount: 2,
      stored: undefined,
      repaired: false,
    });
    expect(decision).toEqual({});
  });

  it("asks for a reply directly when there is no order number", async () => {
    const h = harness();
    const router = routerOf(h);
    const conv = newConversationId();
    const accepted = await consume(
      clientMessage(conv, "Do you ship to Canada?"),
      h.conversation,
      h.deps,
    );
    const request = accepted.steps[0]?.emitted[1] as Envelope;
    const [routed, next] = (await consume(request, router, h.deps)).steps[0]?.emitted ?? [];
    expect(routed?.payload).toMatchObject({ intent: "general", rule: ROUTER_RULES.general });
    expect(next?.event_type).toBe("reply.generation.requested");
    expect(next?.payload).toMatchObject({ intent: "general" });
    expect(next?.payload).not.toHaveProperty("order_id");
    expect(next?.expires_at).toBe(request.expires_at);
    expect(next?.input_version).toBe(1);
  });
});

describe("order lookup", () => {
  async function lookup(text: string, customer = "cust_alice") {
    const h = harness();
    const conv = newConversationId();
    await h.drain([clientMessage(conv, text, { customer })], ["reply-generation"]);
    return {
      h,
      conv,
      completed: only(h.emitted, "order.lookup.completed"),
      next: only(h.emitted, "reply.generation.requested"),
    };
  }

  it("passes the customer's own order on", async () => {
    const { completed, next, conv, h } = await lookup("Where is order 123?");
    const order = SAMPLE_ORDERS.find((o) => o.order_id === "123");
    expect(completed.payload).toEqual({
      conversation_id: conv,
      order_id: "123",
      found: true,
      order,
      looked_up_at: h.clock.now().toISOString(),
    });
    expect(completed.schema_version).toBe(2);
    expect(completed.aggregate.type).toBe("order_lookup");
    expect(completed.expires_at).toBeUndefined();
    expect(next.payload).toMatchObject({ intent: "order_status", order_id: "123", order });
    expect(next.aggregate).toMatchObject({ type: "order_lookup", version: 2 });
    expect(next.input_version).toBe(1);
    expect(next.order_key).toBe(conv);
    expect(next.expires_at).toBe("2026-09-01T10:05:00.000Z");
  });

  it("reports an unknown order as not found", async () => {
    const { completed, next } = await lookup("what about order 999 now");
    expect(completed.payload).toMatchObject({ order_id: "999", found: false });
    expect((completed.payload as { order?: unknown }).order).toBeUndefined();
    expect(next.payload).toMatchObject({ intent: "order_status", order_id: "999" });
    expect((next.payload as { order?: unknown }).order).toBeUndefined();
  });

  it("treats another customer's order as not found and leaks nothing of it", async () => {
    const { completed, next } = await lookup("Where is order 456?", "cust_alice");
    expect(completed.payload).toMatchObject({ order_id: "456", found: false });
    expect(JSON.stringify([completed, next])).not.toContain("skillet");
    expect(JSON.stringify([completed, next])).not.toContain("cust_bob");
    // The owner gets it.
    const owner = await lookup("Where is order 456?", "cust_bob");
    expect(owner.completed.payload).toMatchObject({
      found: true,
      order: { item: "Cast iron skillet" },
    });
  });

  it("lets an orders port error through with its class, committing nothing", async () => {
    const role = orderLookupRole({
      orders: {
        get: async () => Promise.reject(new TransientError("orders.throttled", "slow down")),
      },
    });
    const conv = newConversationId();
    const h = harness();
    await h.drain([clientMessage(conv, "order 123?")], ["order-lookup", "reply-generation"]);
    const request = only(h.emitted, "order.lookup.requested");
    await expect(consume(request, role, h.deps)).rejects.toMatchObject({
      code: "orders.throttled",
    });
    expect(
      (await h.store.load({ state: { type: "order_lookup", id: request.task_id } })).state,
    ).toBeUndefined();
  });
});
