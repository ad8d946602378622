import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { PermanentError, TransientError } from "../../functions/core/errors";
import type { ModelPort } from "../../functions/core/model";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import {
  type ConversationView,
  conversationProjection,
  summarizeConversation,
} from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import type { OrdersPort } from "../../functions/roles/customer-support/integrations/orders/port";
import { MODEL_ACCESS_DENIED_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import {
  HANDOFF_TEXT,
  HANDOFF_TTL_SECONDS,
} from "../../functions/roles/customer-support/step-failure";
import type { Envelope } from "../../schemas";
import { clientMessage } from "./fixtures";
import { newConversationId, ofType, only, supportHarness } from "./support-fixture";

/** A model whose every call fails with `error`. */
const failingModel = (error: Error): ModelPort => ({
  name: "failing",
  converse: () => Promise.reject(error),
});

/** The support roles without the sender: what a failed step emits stays unsent. */
const harness = (options: { model?: ModelPort; orders?: OrdersPort } = {}) =>
  supportHarness({ ...options, without: ["sender"] });

describe("failure facts of the support workflow", () => {
  it("ends a generation the model refuses for good with a failure fact and one hand-off send", async () => {
    const denied = new PermanentError("model.access_denied", "AccessDeniedException: no access");
    const h = harness({ model: failingModel(denied) });
    const conv = newConversationId();
    await h.drain([clientMessage(conv, "Where is order 123?")], ["reply-generation"]);
    const request = only(h.emitted, "reply.generation.requested");

    const result = await consume(request, h.replyGeneration, h.deps);
    expect(result).toMatchObject({ status: "rejected", reason: "model.access_denied" });
    const [failed, handoff] = result.steps[0]?.emitted ?? [];
    expect(failed).toMatchObject({
      event_type: "support.step.failed",
      aggregate: { type: "reply", id: request.task_id, version: 1 },
      task_id: request.task_id,
      causation_id: request.event_id,
      input_version: request.input_version,
      order_key: conv,
      payload: {
        conversation_id: conv,
        step: "reply_generation",
        code: "model.access_denied",
        message: "AccessDeniedException: no access",
        handed_off: true,
      },
    });
    const customer = (request.payload as { customer_id: string }).customer_id;
    expect(handoff).toMatchObject({
      event_type: "notification.send.requested",
      aggregate: { type: "reply", id: request.task_id, version: 2 },
      payload: {
        conversation_id: conv,
        customer_id: customer,
        text: HANDOFF_TEXT,
        logical_attempt: 1,
      },
    });
    const due = h.clock.now().getTime() + HANDOFF_TTL_SECONDS * 1000;
    expect(Date.parse(handoff?.expires_at ?? "")).toBe(due);

    // A redelivery of the same command is a duplicate: no second hand-off.
    const again = await consume(request, h.replyGeneration, h.deps, { receiveCount: 2 });
    expect(again.status).toBe("duplicate");
    expect(again.steps.flatMap((s) => s.emitted)).toEqual([]);
  });

  it("retries a transient model error, and turns it into failure facts on the last attempt", async () => {
    const throttled = new TransientError("model.throttled", "slow down");
    const h = harness({ model: failingModel(throttled) });
    await h.drain([clientMessage(newConversationId(), "Hello there")], ["reply-generation"]);
    const request = only(h.emitted, "reply.generation.requested");

    await expect(consume(request, h.replyGeneration, h.deps, { receiveCount: 2 })).rejects.toBe(
      throttled,
    );
    const last = await consume(request, h.replyGeneration, h.deps, {
      receiveCount: 5,
      lastAttempt: true,
    });
    expect(last).toMatchObject({ status: "rejected", reason: "model.throttled" });
    expect(last.steps[0]?.emitted.map((e) => e.event_type)).toEqual([
      "support.step.failed",
      "notification.send.requested",
    ]);
  });

  it("ends an order lookup whose orders table refuses it with a failure fact, not a reply", async () => {
    const refused = new PermanentError("dynamodb.access_denied", "not authorized to GetItem");
    const h = harness({ orders: { get: () => Promise.reject(refused) } });
    await h.drain([clientMessage(newConversationId(), "Where is order 123?")], ["order-lookup"]);
    const request = only(h.emitted, "order.lookup.requested");
    const result = await consume(request, h.orderLookup, h.deps);
    expect(result).toMatchObject({ status: "rejected", reason: "dynamodb.access_denied" });
    expect(result.steps[0]?.emitted.map((e) => [e.event_type, e.payload])).toEqual([
      [
        "support.step.failed",
        expect.objectContaining({ step: "order_lookup", code: "dynamodb.access_denied" }),
      ],
      ["notification.send.requested", expect.objectContaining({ text: HANDOFF_TEXT })],
    ]);
  });

  it("leaves an operator's review command that fails for good to the dead-letter queue", async () => {
    const h = harness();
    const command = {
      ...clientMessage(newConversationId(), "x"),
      event_type: "reply.approve.requested",
      aggregate: { type: "reply", id: "task_unknown", version: 0 },
      payload: { conversation_id: "conv_x", requested_by: "ops" },
    } as Envelope;
    const failing: Role<unknown> = {
      ...(h.replyGeneration as Role<unknown>),
      decide: () => Promise.reject(new PermanentError("reply.broken", "broken")),
    };
    await expect(consume(command, failing, h.deps)).rejects.toMatchObject({
      code: "reply.broken",
    });
  });

  it("shows the failed step in the conversation view, then the hand-off delivery", async () => {
    const h = harness();
    const conv = newConversationId();
    await h.drain([clientMessage(conv, `Where is order 123? ${MODEL_ACCESS_DENIED_MARKER}`)]);
    const failed = only(h.emitted, "support.step.failed");
    expect(failed.payload).toMatchObject({ step: "reply_generation", code: "model.access_denied" });
    expect(ofType(h.emitted, "reply.generated")).toHaveLength(0);
    const send = only(h.emitted, "notification.send.requested");
    expect((send.payload as { text: string }).text).toBe(HANDOFF_TEXT);

    const view = await h.view(conv);
    expect(view?.turns[failed.task_id]).toMatchObject({
      status: "failed",
      step_failure: { step: "reply_generation", code: "model.access_denied" },
    });
    const delivered = {
      ...send,
      event_id: ulid(),
      event_type: "notification.delivered",
      causation_id: send.event_id,
      aggregate: { type: "delivery", id: send.task_id, version: 1 },
      payload: {
        conversation_id: conv,
        channel: "chat",
        idempotency_key: `${send.task_id}:reply:1`,
        delivery_id: "dlv_1",
        confirmed_by: "send",
      },
    } as Envelope;
    delete (delivered as { expires_at?: string }).expires_at;
    await consume(delivered, conversationProjection, h.deps);
    const after = await h.view(conv);
    expect(after?.turns[failed.task_id]).toMatchObject({
      status: "delivered",
      step_failure: { step: "reply_generation", code: "model.access_denied" },
    });
    const summary = summarizeConversation(after as ConversationView);
    expect(summary.counts).toEqual({ turns: 1, held: 0, handed_off: 1 });
    // Delivering the hand-off message does not answer the customer: a person still has to.
    expect(summary.waiting).toBe("handed_off");
  });

  it("lists a conversation handed off as waiting for a person until the customer writes again", async () => {
    const h = harness();
    const conv = newConversationId();
    await h.drain([clientMessage(conv, `Where is order 123? ${MODEL_ACCESS_DENIED_MARKER}`)]);
    const handedOff = summarizeConversation((await h.view(conv)) as ConversationView);
    expect(handedOff).toMatchObject({ waiting: "handed_off", counts: { handed_off: 1 } });

    // The customer's next message, answered (the model would still see the marker in the history).
    const view = (await h.view(conv)) as ConversationView;
    const next = { task_id: "task_next", status: "delivered" as const };
    const answered = summarizeConversation({
      ...view,
      turns: { ...view.turns, [next.task_id]: next },
      turn_order: [...view.turn_order, next.task_id],
    });
    expect(answered.counts).toMatchObject({ turns: 2, handed_off: 1 });
    expect(answered.waiting).toBeUndefined();
  });
});

describe("cancelled turns in the conversation view", () => {
  it("shows a cancelled turn, who cancelled it, and never moves it back", async () => {
    const h = harness();
    const conv = newConversationId();
    await h.drain(
      [clientMessage(conv, "Is the shop open today?")],
      ["reply-generation", "conversation-projection"],
    );
    const request = only(h.emitted, "reply.generation.requested");
    const cancelled = {
      ...request,
      event_id: ulid(),
      event_type: "support.cancelled",
      schema_version: 1,
      causation_id: request.event_id,
      aggregate: { type: "delivery", id: request.task_id, version: 1 },
      payload: { conversation_id: conv, requested_by: "ops-anna", delivered_keys: [] },
    } as Envelope;
    delete (cancelled as { expires_at?: string }).expires_at;
    await consume(cancelled, conversationProjection, h.deps);
    expect((await h.view(conv))?.turns[request.task_id]).toMatchObject({
      status: "cancelled",
      cancelled_by: "ops-anna",
    });
    // Facts of earlier steps that arrive late fill in the turn but do not reopen it.
    for (const type of ["conversation.message.accepted", "support.routed"])
      await consume(only(h.emitted, type), conversationProjection, h.deps);
    expect((await h.view(conv))?.turns[request.task_id]).toMatchObject({ intent: "general" });
    expect((await h.view(conv))?.turns[request.task_id]?.status).toBe("cancelled");
  });
});
