import { describe, expect, it } from "vitest";
import type { ConversationView } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { summarizeConversation } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import { OPERATOR_ABANDONED } from "../../functions/roles/customer-support/sender/resolve";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import type { Envelope } from "../../schemas";
import { clientMessage } from "./fixtures";
import {
  newConversationId,
  operatorCommand,
  type SupportHarness,
  supportHarness,
} from "./support-fixture";

/**
 * What waits for a person in the support conversation, resolved by operator commands: a held
 * reply approved (edited) or rejected by reply generation, an unknown send outcome resolved by the
 * sender as delivered, resent under the same key, or abandoned. Each decision taken twice has one
 * effect; a decision that does not apply changes nothing.
 */

const harness = () => supportHarness({ maxUnknownAttempts: 1, logErrors: true });

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

async function heldMessage(h: SupportHarness) {
  const conv = newConversationId();
  const message = clientMessage(conv, `Refund order 123 twice? ${HUMAN_REVIEW_MARKER}`);
  await h.drain([message]);
  expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("held_for_review");
  return message;
}

async function unknownMessage(h: SupportHarness, customer: string) {
  const message = clientMessage(newConversationId(), "Where is order 123?", { customer });
  const key = `${message.task_id}:reply:1`;
  h.channel.inject({ kind: "timeout-before-apply", key });
  h.channel.inject({ kind: "query-unknown", key });
  await h.drain([message]);
  expect((await h.sideEffects.get(key))?.state).toBe("unknown");
  expect(h.channel.deliveries()).toHaveLength(0);
  return { message, key };
}

const view = (h: SupportHarness, message: Envelope) => h.view(message.conversation_id as string);

describe("held replies", () => {
  it("an approved reply goes out once under a key of its own, with the edited text", async () => {
    const h = harness();
    const message = await heldMessage(h);
    expect(summarizeConversation((await view(h, message)) as ConversationView).waiting).toBe(
      "held_reply",
    );
    const approve = review("reply.approve.requested", message, { text: "Refund is on its way." });
    await h.drain([approve, approve, review("reply.approve.requested", message)]);
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
    await h.drain([review("reply.reject.requested", message)]);
    expect(h.log.at(-1)).toMatchObject({ status: "discarded" });
    expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("approved");
  });

  it("a rejected reply ends the turn rejected and nothing is sent", async () => {
    const h = harness();
    const message = await heldMessage(h);
    await h.drain([review("reply.reject.requested", message, { reason: "wrong order" })]);
    await h.drain([review("reply.reject.requested", message)]);
    expect(h.channel.sends()).toBe(0);
    expect(h.emitted.filter((e) => e.event_type === "reply.rejected")).toHaveLength(1);
    const current = (await view(h, message)) as ConversationView;
    expect(current.turns[message.task_id]?.status).toBe("rejected");
    expect(summarizeConversation(current).waiting).toBeUndefined();
    await h.drain([review("reply.approve.requested", message)]);
    expect(h.log.at(-1)).toMatchObject({ status: "discarded" });
    expect(h.channel.sends()).toBe(0);
  });

  it("a decision on a reply that was not held changes nothing", async () => {
    const h = harness();
    const message = clientMessage(newConversationId(), "Where is order 123?");
    await h.drain([message]);
    const before = await h.state<ReplyState>("reply", message.task_id);
    await h.drain([review("reply.approve.requested", message)]);
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
    await h.drain([command, command, resolve(message, key, "delivered")]);
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
    await h.drain([resolve(message, key, "resend")]);
    await h.drain([resolve(message, key, "resend")]);
    expect(h.channel.deliveries().map((d) => d.key)).toEqual([key]);
    expect(await h.sideEffects.get(key)).toMatchObject({ state: "succeeded" });
    expect((await view(h, message))?.turns[message.task_id]?.status).toBe("delivered");
  });

  it("abandon: failed and closed, nothing sent; another resolution is refused", async () => {
    const h = harness();
    const { message, key } = await unknownMessage(h, "cust_erin");
    await h.drain([resolve(message, key, "abandon")]);
    expect(await h.sideEffects.get(key)).toMatchObject({
      state: "failed",
      error: { code: OPERATOR_ABANDONED },
    });
    const sends = h.channel.sends();
    await h.drain([resolve(message, key, "resend")]);
    expect(h.log.at(-1)).toMatchObject({ group: "sender", status: "discarded" });
    expect(h.channel.sends()).toBe(sends);
    const turn = (await view(h, message))?.turns[message.task_id];
    expect(turn).toMatchObject({ status: "failed", delivery: { code: OPERATOR_ABANDONED } });
  });
});
