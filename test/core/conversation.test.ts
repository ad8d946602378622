import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { DeterministicLocalModel, HUMAN_REVIEW_MARKER } from "../../functions/adapters/local-model";
import { PermanentError, TransientError } from "../../functions/core/errors";
import type { ModelPort, ModelRequest, ModelResponse } from "../../functions/core/model";
import { consume, type Role } from "../../functions/core/pipeline";
import type { ConsumerDeps } from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import {
  type ConversationState,
  conversation,
  conversationContextReader,
  conversationVersionReader,
  createConversation,
} from "../../functions/roles/conversation";
import {
  type ConversationView,
  conversationProjection,
} from "../../functions/roles/conversation-projection";
import { createOrderLookup, ordersFrom } from "../../functions/roles/order-lookup";
import {
  createReplyGeneration,
  HELD_INVALID_OUTPUT,
  HELD_REQUIRES_REVIEW,
  type ReplyState,
} from "../../functions/roles/reply-generation";
import {
  createRouter,
  ROUTER_RULES,
  type RouteState,
  routeMessage,
} from "../../functions/roles/router";
import { SAMPLE_ORDERS } from "../../lib/local/orders";
import type { Envelope } from "../../schemas";
import type { OrderRecord, ReplyDraft } from "../../schemas/events/conversation";
import { clientMessage, makeDeps } from "./fixtures";

// ---------------------------------------------------------------------------------------------
// Helpers

const newConversationId = () => `conv_${ulid()}`;

/** A ModelPort that answers from a list of replies (the last one repeats) and records calls. */
class ScriptedModel implements ModelPort {
  readonly name = "scripted";
  readonly requests: ModelRequest[] = [];
  constructor(private readonly answers: readonly (string | object | Error)[]) {}
  get calls(): number {
    return this.requests.length;
  }
  async converse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const answer = this.answers[Math.min(this.requests.length - 1, this.answers.length - 1)];
    if (answer instanceof Error) throw answer;
    const text = typeof answer === "string" ? answer : JSON.stringify(answer);
    return {
      text,
      stopReason: "end_turn",
      usage: { inputTokens: 1, outputTokens: 1 },
      modelId: "scripted",
      latencyMs: 0,
    };
  }
}

/** Counts the calls a real ModelPort receives. */
class CountingModel implements ModelPort {
  readonly name: string;
  calls = 0;
  readonly prompts: string[] = [];
  constructor(private readonly inner: ModelPort) {
    this.name = inner.name;
  }
  converse(request: ModelRequest): Promise<ModelResponse> {
    this.calls++;
    this.prompts.push(request.messages.map((m) => m.text).join("\n"));
    return this.inner.converse(request);
  }
}

function draft(overrides: Partial<ReplyDraft> = {}): ReplyDraft {
  return {
    reply_text: "Your refund was submitted on 2026-08-31.",
    confidence: 0.9,
    requires_human_review: false,
    source_refs: [],
    ...overrides,
  };
}

interface Harness {
  readonly deps: ConsumerDeps;
  readonly clock: ReturnType<typeof makeDeps>["clock"];
  readonly store: ReturnType<typeof makeDeps>["store"];
  readonly roles: Role<unknown>[];
  readonly model: CountingModel;
  /** Every emitted event, in order. */
  readonly emitted: Envelope[];
  /** What each delivery did, in order. */
  readonly log: { group: string; type: string; status: string; reason?: string }[];
}

function harness(
  options: { model?: ModelPort; orders?: readonly OrderRecord[]; replyTtlSeconds?: number } = {},
): Harness {
  const { deps, clock, store } = makeDeps();
  const model = new CountingModel(options.model ?? new DeterministicLocalModel());
  const roles = [
    createConversation({ replyTtlSeconds: options.replyTtlSeconds }),
    createRouter({ context: conversationContextReader(store) }),
    createOrderLookup({ orders: ordersFrom(options.orders ?? SAMPLE_ORDERS) }),
    createReplyGeneration({
      model,
      conversationVersion: conversationVersionReader(store),
      context: conversationContextReader(store),
    }),
    conversationProjection,
  ] as Role<unknown>[];
  return { deps, clock, store, roles, model, emitted: [], log: [] };
}

/** Delivers `event` to every subscribed role, then everything they emit, breadth first. */
async function drain(
  h: Harness,
  events: Envelope[],
  options: { skip?: (group: string, event: Envelope) => boolean } = {},
): Promise<void> {
  const queue = [...events];
  while (queue.length > 0) {
    const event = queue.shift() as Envelope;
    for (const role of h.roles) {
      if (!role.subscriptions.includes(event.event_type)) continue;
      if (options.skip?.(role.group, event)) continue;
      const result = await consume(event, role, h.deps);
      h.log.push({
        group: role.group,
        type: event.event_type,
        status: result.status,
        reason: result.reason,
      });
      for (const step of result.steps) {
        h.emitted.push(...step.emitted);
        queue.push(...step.emitted);
      }
    }
  }
}

async function stateOf<S>(h: Harness, type: string, id: string): Promise<S | undefined> {
  const loaded = await h.store.load({ state: { type, id } });
  return loaded.state?.data as S | undefined;
}

const ofType = (events: readonly Envelope[], type: string) =>
  events.filter((e) => e.event_type === type);

function only(events: readonly Envelope[], type: string): Envelope {
  const found = ofType(events, type);
  expect(found, `exactly one ${type}`).toHaveLength(1);
  return found[0] as Envelope;
}

// ---------------------------------------------------------------------------------------------

describe("conversation (ingress)", () => {
  it("bumps the version per message and emits accepted + route requested on its stream", async () => {
    const { deps, store, clock } = makeDeps();
    const role = createConversation({ replyTtlSeconds: 60 });
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
});

describe("router", () => {
  const routerOf = (h: Harness) => createRouter({ context: conversationContextReader(h.store) });
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

  it("emits routed + order lookup (order found in text) keeping the envelope fields", async () => {
    const h = harness();
    const router = routerOf(h);
    const conv = newConversationId();
    const message = clientMessage(conv, "Refund for order 123 please");
    const accepted = await consume(message, h.roles[0] as Role<unknown>, h.deps);
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
    expect(lookup?.event_type).toBe("order.lookup.requested");
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
    const stored = await stateOf<RouteState>(h, "support_route", message.task_id);
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
      h.roles[0] as Role<unknown>,
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
    await drain(h, [clientMessage(conv, text, { customer })], {
      skip: (group) => group === "reply-generation",
    });
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
    const { completed, next } = await lookup("refund order 999 now");
    expect(completed.payload).toMatchObject({ order_id: "999", found: false });
    expect((completed.payload as { order?: unknown }).order).toBeUndefined();
    expect(next.payload).toMatchObject({ intent: "refund", order_id: "999" });
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
    const role = createOrderLookup({
      orders: {
        get: async () => Promise.reject(new TransientError("orders.throttled", "slow down")),
      },
    });
    const conv = newConversationId();
    const h = harness();
    await drain(h, [clientMessage(conv, "order 123?")], {
      skip: (group) => group === "order-lookup" || group === "reply-generation",
    });
    const request = only(h.emitted, "order.lookup.requested");
    await expect(consume(request, role, h.deps)).rejects.toMatchObject({
      code: "orders.throttled",
    });
    expect(
      (await h.store.load({ state: { type: "order_lookup", id: request.task_id } })).state,
    ).toBeUndefined();
  });
});

describe("reply generation", () => {
  /** Runs the chain up to (not into) reply generation; returns the request. */
  async function requestFor(h: Harness, conv: string, text: string, customer = "cust_alice") {
    const before = h.emitted.length;
    await drain(h, [clientMessage(conv, text, { customer })], {
      skip: (group) => group === "reply-generation",
    });
    return only(h.emitted.slice(before), "reply.generation.requested");
  }

  function replyRole(h: Harness, model: ModelPort, maxModelAttempts?: number) {
    return createReplyGeneration({
      model,
      conversationVersion: conversationVersionReader(h.store),
      context: conversationContextReader(h.store),
      maxModelAttempts,
    });
  }

  it("generates a reply from the facts and asks the sender to send it", async () => {
    const h = harness();
    const conv = newConversationId();
    const request = await requestFor(h, conv, "When will I get the refund for order 123?");
    const role = replyRole(h, h.model);
    const result = await consume(request, role, h.deps);
    expect(result.status).toBe("applied");
    expect(h.model.calls).toBe(1);
    const [generated, send] = result.steps[0]?.emitted ?? [];
    const messageId = (request.payload as { message_event_id: string }).message_event_id;
    expect(generated?.event_type).toBe("reply.generated");
    const reply = generated?.payload as ReplyDraft;
    expect(reply.source_refs).toEqual(["order:123", "refund:123", `message:${messageId}`]);
    expect(reply.reply_text).toContain('Re: "When will I get the refund for order 123?"');
    expect(reply.reply_text).toContain("returned");
    expect(reply.reply_text).toContain("Refund status: submitted (49.99 USD)");
    expect(send?.event_type).toBe("notification.send.requested");
    expect(send?.payload).toEqual({
      conversation_id: conv,
      customer_id: "cust_alice",
      channel: "chat",
      text: reply.reply_text,
      logical_attempt: 1,
      // What the sender checks again before sending (the order as looked up).
      rests_on: {
        order_id: "123",
        status: "returned",
        refund_status: "submitted",
        refund_updated_at: "2026-08-31T09:30:00Z",
      },
    });
    expect(send?.expires_at).toBe(request.expires_at);
    expect(send?.input_version).toBe(1);
    expect(send?.order_key).toBe(conv);
    expect(send?.aggregate).toMatchObject({ type: "reply", id: request.task_id, version: 2 });
    expect(generated?.expires_at).toBeUndefined();

    // The prompt: the facts and the allowed refs, no internal ids other than the order's.
    const prompt = h.model.prompts[0] ?? "";
    expect(prompt).toContain('"customer_message":"When will I get the refund for order 123?"');
    expect(prompt).toContain(`- order:123\n- refund:123\n- message:${messageId}`);
    for (const internal of [conv, request.task_id, request.correlation_id, "cust_alice"])
      expect(prompt).not.toContain(internal);

    const state = await stateOf<ReplyState>(h, "reply", request.task_id);
    expect(state).toMatchObject({
      status: "sent_for_delivery",
      model_attempts: 1,
      input_version: 1,
    });
  });

  it("offers only the message ref when no order was found", async () => {
    const h = harness();
    const model = new ScriptedModel([
      draft({ source_refs: ["order:999"] }),
      draft({ source_refs: [] }),
    ]);
    const request = await requestFor(h, newConversationId(), "refund order 999");
    const result = await consume(request, replyRole(h, model), h.deps);
    expect(result.status).toBe("applied");
    expect(model.calls).toBe(2);
    const prompt = model.requests[0]?.messages[0]?.text ?? "";
    expect(prompt).toContain('"order_lookup":{"found":false,"order_id":"999"}');
    expect(prompt).not.toContain("- order:");
  });

  it("discards a superseded request without calling the model", async () => {
    const h = harness();
    const conv = newConversationId();
    const stale = await requestFor(h, conv, "Where is order 123?");
    const fresh = await requestFor(h, conv, "Actually, order A-1001 please");
    expect([stale.input_version, fresh.input_version]).toEqual([1, 2]);
    const model = new ScriptedModel([draft()]);
    const role = replyRole(h, model);

    const discarded = await consume(stale, role, h.deps);
    expect(discarded).toMatchObject({ status: "discarded", reason: "superseded" });
    expect(discarded.steps.flatMap((s) => s.emitted)).toEqual([]);
    expect(model.calls).toBe(0);

    const applied = await consume(fresh, role, h.deps);
    expect(applied.status).toBe("applied");
    expect(model.calls).toBe(1);
  });

  it("discards an expired request without calling the model", async () => {
    const h = harness();
    const request = await requestFor(h, newConversationId(), "Where is order 123?");
    h.clock.advance(301_000);
    const model = new ScriptedModel([draft()]);
    const result = await consume(request, replyRole(h, model), h.deps);
    expect(result).toMatchObject({ status: "discarded", reason: "expired" });
    expect(model.calls).toBe(0);
  });

  it("asks again when a source ref is not allowed, then accepts the corrected draft", async () => {
    const h = harness();
    const request = await requestFor(h, newConversationId(), "Where is order 123?");
    const model = new ScriptedModel([
      draft({ source_refs: ["order:123", "kb://internal/refund-policy"] }),
      draft({ source_refs: ["order:123"] }),
    ]);
    const result = await consume(request, replyRole(h, model), h.deps);
    expect(result.status).toBe("applied");
    expect(model.calls).toBe(2);
    const correction = model.requests[1]?.messages.at(-1)?.text ?? "";
    expect(correction).toContain("source_refs.1");
    expect(correction).toContain("kb://internal/refund-policy");
    const generated = only(result.steps[0]?.emitted ?? [], "reply.generated");
    expect((generated.payload as ReplyDraft).source_refs).toEqual(["order:123"]);
    only(result.steps[0]?.emitted ?? [], "notification.send.requested");
    expect((await stateOf<ReplyState>(h, "reply", request.task_id))?.model_attempts).toBe(2);
  });

  it("holds a reply that asks for a human review instead of sending it", async () => {
    const h = harness();
    const request = await requestFor(h, newConversationId(), "Refund order 123 twice?");
    const model = new ScriptedModel([
      draft({ requires_human_review: true, reply_text: "Let me check with a colleague." }),
    ]);
    const result = await consume(request, replyRole(h, model), h.deps);
    const emitted = result.steps[0]?.emitted ?? [];
    expect(emitted.map((e) => e.event_type)).toEqual(["reply.generated", "reply.held_for_review"]);
    expect(emitted[1]?.payload).toEqual({
      conversation_id: request.conversation_id,
      reply_text: "Let me check with a colleague.",
      reason: HELD_REQUIRES_REVIEW,
    });
    expect(emitted[1]?.expires_at).toBeUndefined();
    expect((await stateOf<ReplyState>(h, "reply", request.task_id))?.status).toBe(
      "held_for_review",
    );
  });

  it("holds the reply for review when the model never answers in shape", async () => {
    const h = harness();
    const request = await requestFor(h, newConversationId(), "Where is order 123?");
    const model = new ScriptedModel([draft({ source_refs: ["order:999"] })]);
    const result = await consume(request, replyRole(h, model, 2), h.deps);
    expect(result.status).toBe("applied");
    expect(model.calls).toBe(2);
    const emitted = result.steps[0]?.emitted ?? [];
    expect(emitted.map((e) => e.event_type)).toEqual(["reply.held_for_review"]);
    expect(emitted[0]?.payload).toMatchObject({ reason: HELD_INVALID_OUTPUT });
    expect(JSON.stringify(emitted[0]?.payload)).toContain("order:999");
    expect(await stateOf<ReplyState>(h, "reply", request.task_id)).toMatchObject({
      status: "held_for_review",
      reason: HELD_INVALID_OUTPUT,
      model_attempts: 2,
    });
  });

  it("rethrows a transient model error and commits nothing, then succeeds on redelivery", async () => {
    const h = harness();
    const request = await requestFor(h, newConversationId(), "Where is order 123?");
    const throttled = new TransientError("model.throttled", "slow down");
    const model = new ScriptedModel([throttled, draft({ source_refs: ["order:123"] })]);
    const role = replyRole(h, model);
    await expect(consume(request, role, h.deps)).rejects.toBe(throttled);
    expect(await stateOf(h, "reply", request.task_id)).toBeUndefined();
    const again = await consume(request, role, h.deps, { receiveCount: 2 });
    expect(again.status).toBe("applied");
    expect(again.steps[0]?.emitted.map((e) => e.event_type)).toEqual([
      "reply.generated",
      "notification.send.requested",
    ]);
  });

  it("lets the local model's review marker drive the review path", async () => {
    const h = harness();
    await drain(h, [
      clientMessage(newConversationId(), `Is order 123 refunded? ${HUMAN_REVIEW_MARKER}`),
    ]);
    const held = only(h.emitted, "reply.held_for_review");
    expect(held.payload).toMatchObject({ reason: HELD_REQUIRES_REVIEW });
    expect(ofType(h.emitted, "notification.send.requested")).toHaveLength(0);
  });
});

describe("the whole chain and the conversation projection", () => {
  /** The sender's outcome, appended on delivery/<task_id> as the sender would. */
  async function deliver(h: Harness, send: Envelope, outcome: "delivered" | "failed") {
    const payload = send.payload as { conversation_id: string; channel: string };
    const key = `${send.task_id}:reply:1`;
    return appendToStream(h.deps, {
      aggregate: { type: "delivery", id: send.task_id },
      producer: "sender",
      correlationId: send.correlation_id,
      taskId: send.task_id,
      cause: send,
      decide: () => ({
        state: { outcome },
        emit: [
          outcome === "delivered"
            ? {
                type: "notification.delivered",
                payload: {
                  ...base(payload),
                  idempotency_key: key,
                  delivery_id: "dlv_1",
                  confirmed_by: "send",
                },
                orderKey: payload.conversation_id,
                inputVersion: send.input_version,
              }
            : {
                type: "notification.failed",
                payload: {
                  ...base(payload),
                  idempotency_key: key,
                  code: "channel.rejected",
                  message: "blocked",
                  outcome: "failed",
                },
                orderKey: payload.conversation_id,
                inputVersion: send.input_version,
              },
        ],
      }),
    });
  }
  const base = (p: { conversation_id: string; channel: string }) => ({
    conversation_id: p.conversation_id,
    channel: p.channel,
  });

  it("folds a whole chain per turn, and drops a superseded reply", async () => {
    const h = harness();
    const conv = newConversationId();
    const first = clientMessage(conv, "Where is order 123?");
    const second = clientMessage(conv, "And is order A-1001 shipped?");
    const third = clientMessage(conv, "Refund order 456");
    // Two messages arrive before any reply is generated: the first reply is superseded.
    await drain(h, [first, second], { skip: (group) => group === "reply-generation" });
    const pending = ofType(h.emitted, "reply.generation.requested");
    expect(pending).toHaveLength(2);
    await drain(h, pending);
    expect(h.log.filter((l) => l.group === "reply-generation")).toEqual([
      {
        group: "reply-generation",
        type: "reply.generation.requested",
        status: "discarded",
        reason: "superseded",
      },
      {
        group: "reply-generation",
        type: "reply.generation.requested",
        status: "applied",
        reason: undefined,
      },
    ]);
    expect(h.model.calls).toBe(1);
    const send = only(h.emitted, "notification.send.requested");
    expect(send.task_id).toBe(second.task_id);
    expect(send.input_version).toBe(2);

    await drain(h, await deliver(h, send, "delivered"));
    await drain(h, [third]);

    const view = (await stateOf<ConversationView>(
      h,
      "conversation_view",
      conv,
    )) as ConversationView;
    expect(view.version).toBe(3);
    expect(view.turn_order).toEqual([first.task_id, second.task_id, third.task_id]);
    expect(view.turns[first.task_id]).toEqual({
      task_id: first.task_id,
      input_version: 1,
      text: "Where is order 123?",
      intent: "order_status",
      order_id: "123",
      order_found: true,
      looked_up_at: h.clock.now().toISOString(),
      status: "looked_up",
    });
    expect(view.turns[second.task_id]).toMatchObject({
      input_version: 2,
      intent: "order_status",
      order_id: "A-1001",
      order_found: true,
      status: "delivered",
      delivery: {
        idempotency_key: `${second.task_id}:reply:1`,
        delivery_id: "dlv_1",
        confirmed_by: "send",
      },
    });
    expect(view.turns[second.task_id]?.reply_text).toContain("shipped");
    // Order 456 is Bob's: not found for Alice; the reply was generated and sent for delivery.
    expect(view.turns[third.task_id]).toMatchObject({
      input_version: 3,
      intent: "refund",
      order_found: false,
      status: "generated",
    });
    expect(view.turns[third.task_id]?.reply_text).toContain("could not find order 456");
  });

  it("never moves a turn backwards, whatever order its facts arrive in", async () => {
    const h = harness();
    const conv = newConversationId();
    const message = clientMessage(conv, "Where is order 123?");
    await drain(h, [message], { skip: (group) => group === "conversation-projection" });
    const send = only(h.emitted, "notification.send.requested");
    const [delivered] = await deliver(h, send, "delivered");
    const [failed] = await deliver(h, send, "failed");
    // Facts in reverse order: delivery first, the acceptance last.
    const facts = [
      delivered,
      failed,
      ...h.emitted
        .filter((e) => conversationProjection.subscriptions.includes(e.event_type))
        .reverse(),
    ] as Envelope[];
    for (const fact of facts) await consume(fact, conversationProjection, h.deps);
    const view = (await stateOf<ConversationView>(
      h,
      "conversation_view",
      conv,
    )) as ConversationView;
    expect(view.turns[message.task_id]).toMatchObject({
      status: "delivered",
      text: "Where is order 123?",
      intent: "order_status",
      order_found: true,
      delivery: { delivery_id: "dlv_1", confirmed_by: "send" },
    });
    expect(view.turns[message.task_id]?.delivery?.code).toBeUndefined();
  });

  it("records a failed delivery and a held reply", async () => {
    const h = harness();
    const conv = newConversationId();
    const message = clientMessage(conv, "Where is order 123?");
    await drain(h, [message]);
    await drain(h, await deliver(h, only(h.emitted, "notification.send.requested"), "failed"));
    const held = clientMessage(conv, `Refund order 123? ${HUMAN_REVIEW_MARKER}`);
    await drain(h, [held]);
    const view = (await stateOf<ConversationView>(
      h,
      "conversation_view",
      conv,
    )) as ConversationView;
    expect(view.turns[message.task_id]).toMatchObject({
      status: "failed",
      delivery: { idempotency_key: `${message.task_id}:reply:1`, code: "channel.rejected" },
    });
    expect(view.turns[held.task_id]).toMatchObject({
      status: "held_for_review",
      held_reason: HELD_REQUIRES_REVIEW,
    });
  });

  it("keeps the last 50 turns", async () => {
    const h = harness();
    h.roles.splice(1); // the conversation group only, plus the projection below
    h.roles.push(conversationProjection as Role<unknown>);
    const conv = newConversationId();
    const messages = Array.from({ length: 52 }, (_, i) => clientMessage(conv, `hello ${i}`));
    await drain(h, messages);
    const view = (await stateOf<ConversationView>(
      h,
      "conversation_view",
      conv,
    )) as ConversationView;
    expect(view.turn_order).toHaveLength(50);
    expect(Object.keys(view.turns)).toHaveLength(50);
    expect(view.turn_order[0]).toBe(messages[2]?.task_id);
    expect(view.turns[messages[0]?.task_id ?? ""]).toBeUndefined();
    expect(view.version).toBe(52);
  });
});
