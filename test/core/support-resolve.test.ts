import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { LocalChannel } from "../../functions/adapters/channel/local-channel";
import { DeterministicLocalModel, HUMAN_REVIEW_MARKER } from "../../functions/adapters/local-model";
import { consume, type Role } from "../../functions/core/pipeline";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import {
  conversationContextReader,
  conversationVersionReader,
  createConversation,
} from "../../functions/roles/conversation";
import {
  type ConversationView,
  conversationProjection,
} from "../../functions/roles/conversation-projection";
import { createOrderLookup, ordersFrom } from "../../functions/roles/order-lookup";
import { createReplyGeneration, type ReplyState } from "../../functions/roles/reply-generation";
import { createRouter } from "../../functions/roles/router";
import { createSender, type DeliveryState } from "../../functions/roles/sender";
import { OPERATOR_ABANDONED } from "../../functions/roles/sender-resolve";
import { summarizeConversation } from "../../functions/roles/summaries";
import { SAMPLE_ORDERS } from "../../lib/local/orders";
import { type Envelope, registry } from "../../schemas";
import { clientMessage, makeDeps } from "./fixtures";

/**
 * What waits for a person in the support conversation, resolved by operator commands: a held
 * reply approved (edited) or rejected by reply generation, an unknown send outcome resolved by the
 * sender as delivered, resent under the same key, or abandoned. Each decision taken twice has one
 * effect; a decision that does not apply changes nothing.
 */

function harness() {
  const { deps, store } = makeDeps();
  const channel = new LocalChannel();
  const sideEffects = new InMemorySideEffects();
  const versions = conversationVersionReader(store);
  const roles = [
    createConversation({}),
    createRouter({ context: conversationContextReader(store) }),
    createOrderLookup({ orders: ordersFrom(SAMPLE_ORDERS) }),
    createReplyGeneration({
      model: new DeterministicLocalModel(),
      conversationVersion: versions,
      context: conversationContextReader(store),
    }),
    createSender({ channel, sideEffects, conversationVersion: versions, maxUnknownAttempts: 1 }),
    conversationProjection,
  ] as Role<unknown>[];
  const log: { group: string; type: string; status: string; reason?: string }[] = [];
  const emitted: Envelope[] = [];
  /** Delivers the events to every subscribed role, then what they emit, breadth first. */
  async function drain(...events: Envelope[]) {
    const queue = [...events];
    while (queue.length > 0) {
      const event = queue.shift() as Envelope;
      for (const role of roles.filter((r) => r.subscriptions.includes(event.event_type))) {
        const result = await consume(event, role, deps).catch((error: Error) => {
          log.push({ group: role.group, type: event.event_type, status: `error ${error.message}` });
          return undefined;
        });
        if (!result) continue;
        log.push({ group: role.group, type: event.event_type, ...result });
        for (const step of result.steps) {
          emitted.push(...step.emitted);
          queue.push(...step.emitted);
        }
      }
    }
  }
  const state = async <S>(type: string, id: string) =>
    (await store.load({ state: { type, id } })).state?.data as S | undefined;
  return { store, channel, sideEffects, drain, state, log, emitted };
}

type Harness = ReturnType<typeof harness>;

function operatorCommand(
  type: string,
  aggregate: { type: string; id: string },
  conversationId: string,
  payload: Record<string, unknown>,
): Envelope {
  const id = ulid();
  const parsed = registry.parse({
    event_id: id,
    event_type: type,
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: aggregate.id,
    conversation_id: conversationId,
    aggregate: { ...aggregate, version: 0 },
    order_key: conversationId,
    producer: "agentbus-cli",
    payload: { conversation_id: conversationId, requested_by: "ops_anna", ...payload },
  });
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.envelope;
}

const review = (type: string, message: Envelope, payload: Record<string, unknown> = {}) =>
  operatorCommand(
    type,
    { type: "reply", id: message.task_id },
    message.conversation_id as string,
    payload,
  );

const resolve = (message: Envelope, key: string, resolution: string) =>
  operatorCommand(
    "notification.resolve.requested",
    { type: "delivery", id: message.task_id },
    message.conversation_id as string,
    { idempotency_key: key, resolution, reason: "checked with the chat vendor" },
  );

async function heldMessage(h: Harness) {
  const conv = `conv_${ulid()}`;
  const message = clientMessage(conv, `Refund order 123 twice? ${HUMAN_REVIEW_MARKER}`);
  await h.drain(message);
  expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("held_for_review");
  return message;
}

async function unknownMessage(h: Harness, customer: string) {
  const message = clientMessage(`conv_${ulid()}`, "Where is order 123?", { customer });
  const key = `${message.task_id}:reply:1`;
  h.channel.inject({ kind: "timeout-before-apply", key });
  h.channel.inject({ kind: "query-unknown", key });
  await h.drain(message);
  expect((await h.sideEffects.get(key))?.state).toBe("unknown");
  expect(h.channel.deliveries()).toHaveLength(0);
  return { message, key };
}

const view = (h: Harness, message: Envelope) =>
  h.state<ConversationView>("conversation_view", message.conversation_id as string);

describe("held replies", () => {
  it("an approved reply goes out once under a key of its own, with the edited text", async () => {
    const h = harness();
    const message = await heldMessage(h);
    expect(summarizeConversation((await view(h, message)) as ConversationView).waiting).toBe(
      "held_reply",
    );
    const approve = review("reply.approve.requested", message, { text: "Refund is on its way." });
    await h.drain(approve, approve, review("reply.approve.requested", message));
    const key = `${message.task_id}:reply:2`;
    expect(h.channel.deliveries().map((d) => [d.key, d.text])).toEqual([
      [key, "Refund is on its way."],
    ]);
    expect(h.emitted.filter((e) => e.event_type === "reply.approved")).toHaveLength(1);
    const reply = await h.state<ReplyState>("reply", message.task_id);
    expect(reply).toMatchObject({ status: "approved", review: { requested_by: "ops_anna" } });
    const turn = (await view(h, message))?.turns[message.task_id];
    expect(turn).toMatchObject({ status: "delivered", reviewed_by: "ops_anna" });
    expect(turn?.delivery?.idempotency_key).toBe(key);
    expect(summarizeConversation((await view(h, message)) as ConversationView).waiting).toBe(
      undefined,
    );
    await h.drain(review("reply.reject.requested", message));
    expect(h.log.at(-1)).toMatchObject({ status: "discarded" });
    expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("approved");
  });

  it("a rejected reply ends the turn rejected and nothing is sent", async () => {
    const h = harness();
    const message = await heldMessage(h);
    await h.drain(review("reply.reject.requested", message, { reason: "wrong order" }));
    await h.drain(review("reply.reject.requested", message));
    expect(h.channel.sends()).toBe(0);
    expect(h.emitted.filter((e) => e.event_type === "reply.rejected")).toHaveLength(1);
    const current = (await view(h, message)) as ConversationView;
    expect(current.turns[message.task_id]?.status).toBe("rejected");
    expect(summarizeConversation(current).waiting).toBeUndefined();
    await h.drain(review("reply.approve.requested", message));
    expect(h.log.at(-1)).toMatchObject({ status: "discarded" });
    expect(h.channel.sends()).toBe(0);
  });

  it("a decision on a reply that was not held changes nothing", async () => {
    const h = harness();
    const message = clientMessage(`conv_${ulid()}`, "Where is order 123?");
    await h.drain(message);
    const before = await h.state<ReplyState>("reply", message.task_id);
    await h.drain(review("reply.approve.requested", message));
    expect(h.log.at(-1)).toMatchObject({ group: "reply-generation", status: "discarded" });
    expect(await h.state<ReplyState>("reply", message.task_id)).toEqual(before);
    expect(h.channel.deliveries()).toHaveLength(1);
  });
});

describe("unknown send outcomes", () => {
  it("resolved as delivered: the record succeeds, the conversation sees an operator's delivery", async () => {
    const h = harness();
    const { message, key } = await unknownMessage(h, "cust_carol");
    const command = resolve(message, key, "delivered");
    await h.drain(command, command, resolve(message, key, "delivered"));
    expect(await h.sideEffects.get(key)).toMatchObject({ state: "succeeded" });
    expect(h.channel.deliveries()).toHaveLength(0);
    const delivered = h.emitted.filter((e) => e.event_type === "notification.delivered");
    expect(delivered.map((e) => e.payload)).toMatchObject([{ confirmed_by: "operator" }]);
    const turn = (await view(h, message))?.turns[message.task_id];
    expect(turn).toMatchObject({ status: "delivered", delivery: { confirmed_by: "operator" } });
    const state = await h.state<DeliveryState>("delivery", message.task_id);
    expect(state?.keys[key]).toMatchObject({ resolution: "delivered", resolved_by: "ops_anna" });
  });

  it("resend: sent again under the same key, once", async () => {
    const h = harness();
    const { message, key } = await unknownMessage(h, "cust_dave");
    await h.drain(resolve(message, key, "resend"));
    await h.drain(resolve(message, key, "resend"));
    expect(h.channel.deliveries().map((d) => d.key)).toEqual([key]);
    expect(await h.sideEffects.get(key)).toMatchObject({ state: "succeeded" });
    expect((await view(h, message))?.turns[message.task_id]?.status).toBe("delivered");
  });

  it("abandon: failed and closed, nothing sent; another resolution is refused", async () => {
    const h = harness();
    const { message, key } = await unknownMessage(h, "cust_erin");
    await h.drain(resolve(message, key, "abandon"));
    expect(await h.sideEffects.get(key)).toMatchObject({
      state: "failed",
      error: { code: OPERATOR_ABANDONED },
    });
    const sends = h.channel.sends();
    await h.drain(resolve(message, key, "resend"));
    expect(h.log.at(-1)).toMatchObject({ group: "sender", status: "discarded" });
    expect(h.channel.sends()).toBe(sends);
    const turn = (await view(h, message))?.turns[message.task_id];
    expect(turn).toMatchObject({ status: "failed", delivery: { code: OPERATOR_ABANDONED } });
  });
});
