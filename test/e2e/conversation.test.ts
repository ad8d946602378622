import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { ConversationState } from "../../functions/roles/customer-support/conversation/conversation";
import { MODEL_ACCESS_DENIED_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import { HANDOFF_TEXT } from "../../functions/roles/customer-support/step-failure";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  customerMessage,
  sendCommandOf,
  sideEffectOf,
  streamOf,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import { readDeadLetters } from "../../lib/dev/local/scenario/dead-letters";
import { topology } from "../../lib/infra/project";
import type { Envelope } from "../../schemas";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * The customer-support conversation end to end on the local runtime: the stack synthesized and
 * deployed to the emulator, the handlers running in-process, customers' messages put on the
 * events bus as a client would, replies delivered through the local channel (which records every
 * delivery). Each test asserts on stored state and on the channel's record of deliveries.
 */
describe("customer-support conversation on the local runtime", () => {
  const local = localSupportStack("cv");
  const { deliveriesTo, delivered, inboxRow, outcomeOf, putMessages: send, sendOf } = local;
  const conv = () => `conv_${ulid()}`;
  const routes = async (conversationId: string) =>
    (await streamOf(local.env, { type: "conversation", id: conversationId })).filter(
      (e) => e.event_type === "support.route.requested",
    );

  it(
    "two messages in quick succession: one reply, built from the second; the first one superseded",
    async () => {
      const id = conv();
      const first = customerMessage(id, "cust_alice", "Has the refund for order 123 gone through?");
      const second = customerMessage(id, "cust_alice", "Sorry, I meant order A-1001: where is it?");
      local.env.runtime.pauseGroup("sender");
      try {
        await send(first);
        const firstSend = await sendOf(first);
        expect(firstSend.input_version).toBe(1);
        await send(second);
        await sendOf(second);
      } finally {
        local.env.runtime.resumeGroup("sender");
      }
      const view = await delivered(id, second.task_id);

      const deliveries = deliveriesTo(id);
      expect(deliveries).toHaveLength(1);
      expect(deliveries[0]?.key).toBe(`${second.task_id}:reply:1`);
      expect(deliveries[0]?.text).toContain("A-1001");
      expect(deliveries[0]?.recipient).toBe("cust_alice");

      const conversation = await local.env.store.load({ state: { type: "conversation", id } });
      expect((conversation.state?.data as ConversationState | undefined)?.version).toBe(2);
      expect(view.turns[second.task_id]).toMatchObject({ input_version: 2, status: "delivered" });
      // The first turn says it will get no reply, and which turn answers it.
      const after = await local.turnReaches(id, first.task_id, "superseded");
      expect(after.turns[first.task_id]?.superseded_by).toBe(second.task_id);

      await local.env.runtime.idle();
      const firstSend = (await sendCommandOf(local.env, first.task_id)) as Envelope;
      expect(await inboxRow("sender", firstSend.event_id)).toMatchObject({
        outcome: "discarded",
        reason: "superseded",
      });
      // The superseded send never reached the channel, nor claimed an idempotency key.
      expect(await sideEffectOf(local.env, `${first.task_id}:reply:1`)).toBeUndefined();
    },
    TIMEOUT * 2,
  );

  it(
    "'check my order' then 'the order number is A-1002': one reply about A-1002, built from both, no text in commands",
    async () => {
      const id = conv();
      const first = customerMessage(id, "cust_alice", "I want to check my order");
      const second = customerMessage(id, "cust_alice", "the order number is A-1002");
      const requestOf = async (type: string, taskId: string) =>
        (await streamOf(local.env, { type, id: taskId })).find(
          (e) => e.event_type === "reply.generation.requested",
        );
      local.env.runtime.pauseGroup("reply-generation");
      try {
        await send(first);
        await waitUntil(
          "the first reply request",
          () => requestOf("support_route", first.task_id),
          TIMEOUT,
        );
        await send(second);
        await waitUntil(
          "the second reply request",
          () => requestOf("order_lookup", second.task_id),
          TIMEOUT,
        );
      } finally {
        local.env.runtime.resumeGroup("reply-generation");
      }
      await delivered(id, second.task_id);
      await local.env.runtime.idle();

      const deliveries = deliveriesTo(id);
      expect(deliveries.map((d) => d.key)).toEqual([`${second.task_id}:reply:1`]);
      expect(deliveries[0]?.text).toContain("Order A-1002 (Rain jacket, size M) is placed.");
      const generated = (await streamOf(local.env, { type: "reply", id: second.task_id })).find(
        (e) => e.event_type === "reply.generated",
      );
      expect((generated?.payload as { source_refs?: string[] } | undefined)?.source_refs).toEqual(
        expect.arrayContaining([
          "order:A-1002",
          `message:${first.event_id}`,
          `message:${second.event_id}`,
        ]),
      );
      // The commands of both turns name their context; none carries what the customer wrote.
      const streams = [
        { type: "conversation", id },
        ...[first, second].flatMap((m) => [
          { type: "support_route", id: m.task_id },
          { type: "order_lookup", id: m.task_id },
        ]),
      ];
      const commands = (await Promise.all(streams.map((ref) => streamOf(local.env, ref))))
        .flat()
        .filter((e) => e.event_type.endsWith(".requested"));
      expect(commands.length).toBeGreaterThanOrEqual(5);
      for (const command of commands) {
        expect(command.payload, command.event_type).not.toHaveProperty("text");
        expect(JSON.stringify(command.payload)).not.toContain("check my order");
      }
    },
    TIMEOUT * 2,
  );

  it(
    "route requests of two messages reach the router out of order: one reply, from the second",
    async () => {
      const id = conv();
      const first = customerMessage(id, "cust_erin", "I want to check my order");
      const second = customerMessage(id, "cust_erin", "The order number is A-1002");
      local.env.runtime.pauseStream();
      let routeRequests: Envelope[] = [];
      try {
        await send(first);
        await waitUntil(
          "the first route request",
          async () => (await routes(id)).length === 1 || undefined,
          TIMEOUT,
        );
        await send(second);
        routeRequests = await waitUntil(
          "both route requests",
          async () => {
            const found = await routes(id);
            return found.length === 2 ? found : undefined;
          },
          TIMEOUT,
        );
        // The second message's route request reaches the bus first (as a replay would bring it).
        await putOnBus(local.env, "commands", [routeRequests[1] as Envelope]);
        await waitUntil(
          "the router's gap repair",
          async () => (await inboxRow("router", routeRequests[0]?.event_id ?? "")) ?? undefined,
          TIMEOUT,
        );
      } finally {
        local.env.runtime.resumeStream();
      }
      const view = await delivered(id, second.task_id);
      await local.env.runtime.idle();

      expect(routeRequests.map((e) => e.aggregate.version)).toEqual([2, 4]);
      const deliveries = deliveriesTo(id);
      expect(deliveries).toHaveLength(1);
      expect(deliveries[0]?.key).toBe(`${second.task_id}:reply:1`);
      expect(view.turns[second.task_id]).toMatchObject({ input_version: 2, status: "delivered" });
      // Each message was routed under its own task.
      for (const message of [first, second]) {
        const routed = await streamOf(local.env, { type: "support_route", id: message.task_id });
        expect(routed.map((e) => e.event_type)).toContain("support.routed");
        expect(routed.every((e) => e.task_id === message.task_id)).toBe(true);
      }
      const repaired = (
        local.env.observations.deliveries.get(routeRequests[0]?.event_id ?? "") ?? []
      ).filter((d) => d.group === "router" && d.status === "applied");
      expect(repaired).toEqual([expect.objectContaining({ repaired: true })]);
    },
    TIMEOUT * 2,
  );

  it(
    "a send that timed out after applying comes back past its deadline: delivered, by query",
    async () => {
      const id = conv();
      const message = customerMessage(id, "cust_frank", "Where is order 456?", {
        expires_at: new Date(Date.now() + 30_000).toISOString(),
      });
      local.env.runtime.pauseGroup("sender");
      let command: Envelope;
      try {
        await send(message);
        command = await sendOf(message);
        local.env.channel.inject({ kind: "timeout-after-apply", recipient: "cust_frank" });
        local.env.channel.inject({ kind: "query-unknown", recipient: "cust_frank" });
      } finally {
        local.env.runtime.resumeGroup("sender");
      }
      const unknownOutcome = () =>
        local.env.observations.errors.some(
          (e) => e.group === "sender" && e.code === "channel.outcome_unknown",
        ) || undefined;
      await waitUntil("the first attempt's unknown outcome", async () => unknownOutcome(), TIMEOUT);
      local.env.runtime.pauseGroup("sender");
      try {
        const deadline = Date.parse(command.expires_at ?? "");
        expect(Number.isFinite(deadline)).toBe(true);
        await new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now()) + 500));
      } finally {
        local.env.runtime.resumeGroup("sender");
      }
      const view = await delivered(id, message.task_id);
      await local.env.runtime.idle();

      const key = `${message.task_id}:reply:1`;
      expect(deliveriesTo(id).map((d) => d.key)).toEqual([key]);
      expect(view.turns[message.task_id]?.delivery).toMatchObject({
        idempotency_key: key,
        confirmed_by: "query",
      });
      expect(await sideEffectOf(local.env, key)).toMatchObject({ state: "succeeded" });
      const facts = await streamOf(local.env, { type: "delivery", id: message.task_id });
      expect(facts.map((e) => e.event_type)).toEqual(["notification.delivered"]);
      expect(await outcomeOf("sender", command)).toMatchObject({ outcome: "applied" });
    },
    TIMEOUT * 3,
  );

  it(
    "the send command delivered three times: one delivery",
    async () => {
      const id = conv();
      const message = customerMessage(id, "cust_bob", "Was order 456 delivered?");
      const sendsBefore = local.env.channel.sends();
      local.env.runtime.pauseGroup("sender");
      let command: Envelope;
      try {
        await send(message);
        command = await sendOf(message);
        // Two more copies of the same command (the same event id), as a replay would deliver them.
        await putOnBus(local.env, "commands", [command, command]);
      } finally {
        local.env.runtime.resumeGroup("sender");
      }
      await delivered(id, message.task_id);
      await local.env.runtime.idle();

      const key = `${message.task_id}:reply:1`;
      expect(deliveriesTo(id).map((d) => d.key)).toEqual([key]);
      expect(local.env.channel.sends() - sendsBefore).toBe(1);
      const record = await sideEffectOf(local.env, key);
      expect(record).toMatchObject({ state: "succeeded", attempts: 1 });
      const facts = await streamOf(local.env, { type: "delivery", id: message.task_id });
      expect(facts.map((e) => e.event_type)).toEqual(["notification.delivered"]);
      const seen = (local.env.observations.deliveries.get(command.event_id) ?? []).filter(
        (d) => d.group === "sender",
      );
      expect(seen.filter((d) => d.status === "applied")).toHaveLength(1);
    },
    TIMEOUT * 2,
  );

  it(
    "the channel times out after applying the send: resolved by query, one delivery, no new key",
    async () => {
      const id = conv();
      local.env.channel.inject({ kind: "timeout-after-apply", recipient: "cust_carol" });
      const message = customerMessage(
        id,
        "cust_carol",
        "When will the refund for order 789 arrive?",
      );
      const queriesBefore = local.env.channel.queries();
      await send(message);
      const view = await delivered(id, message.task_id);

      const key = `${message.task_id}:reply:1`;
      expect(deliveriesTo(id).map((d) => d.key)).toEqual([key]);
      expect(local.env.channel.queries() - queriesBefore).toBeGreaterThanOrEqual(1);
      expect(view.turns[message.task_id]?.delivery).toMatchObject({
        idempotency_key: key,
        confirmed_by: "query",
      });
      expect(await sideEffectOf(local.env, key)).toMatchObject({ state: "succeeded", attempts: 1 });
      expect(await sideEffectOf(local.env, `${message.task_id}:reply:2`)).toBeUndefined();
      const facts = await streamOf(local.env, { type: "delivery", id: message.task_id });
      expect(facts).toHaveLength(1);
      expect(facts[0]?.payload).toMatchObject({ idempotency_key: key, confirmed_by: "query" });
    },
    TIMEOUT * 2,
  );

  it(
    "an expired command: no model call, no delivery, a recorded expired discard",
    async () => {
      const id = conv();
      const message = customerMessage(id, "cust_alice", "Is the shop open today?", {
        expires_at: new Date(Date.now() + 10_000).toISOString(),
      });
      local.env.runtime.pauseGroup("reply-generation");
      let request: Envelope;
      try {
        await send(message);
        request = await waitUntil(
          "the generation request",
          async () =>
            (await streamOf(local.env, { type: "support_route", id: message.task_id })).find(
              (e) => e.event_type === "reply.generation.requested",
            ),
          TIMEOUT,
        );
        expect(request.expires_at).toBe(message.expires_at);
        await new Promise((r) =>
          setTimeout(r, Date.parse(request.expires_at ?? "") - Date.now() + 500),
        );
      } finally {
        local.env.runtime.resumeGroup("reply-generation");
      }
      await waitUntil("the discard", () => inboxRow("reply-generation", request.event_id), TIMEOUT);
      await local.env.runtime.idle();

      expect(await inboxRow("reply-generation", request.event_id)).toMatchObject({
        outcome: "discarded",
        reason: "expired",
      });
      expect(local.env.model.calls({ taskId: message.task_id })).toEqual([]);
      expect(await streamOf(local.env, { type: "reply", id: message.task_id })).toEqual([]);
      expect(deliveriesTo(id)).toEqual([]);
    },
    TIMEOUT * 2,
  );

  it(
    "a model that refuses for good: a failure fact, one hand-off delivered, nothing dead-lettered",
    async () => {
      const id = conv();
      const message = customerMessage(
        id,
        "cust_alice",
        `Where is order 123? ${MODEL_ACCESS_DENIED_MARKER}`,
      );
      await send(message);
      const view = await delivered(id, message.task_id);
      await local.env.runtime.idle();

      expect(view.turns[message.task_id]).toMatchObject({
        status: "delivered",
        step_failure: { step: "reply_generation", code: "model.access_denied" },
      });
      const reply = await streamOf(local.env, { type: "reply", id: message.task_id });
      expect(reply.map((e) => e.event_type)).toEqual([
        "support.step.failed",
        "notification.send.requested",
      ]);
      const request = (
        await streamOf(local.env, { type: "order_lookup", id: message.task_id })
      ).find((e) => e.event_type === "reply.generation.requested");
      expect(await inboxRow("reply-generation", request?.event_id ?? "")).toMatchObject({
        outcome: "rejected",
        reason: "model.access_denied",
      });
      const handoffs = deliveriesTo(id);
      expect(handoffs.map((d) => [d.key, d.text])).toEqual([
        [`${message.task_id}:reply:1`, HANDOFF_TEXT],
      ]);
      const letters = await readDeadLetters(local.env);
      expect(letters.filter((d) => d.eventId === request?.event_id)).toEqual([]);
    },
    TIMEOUT * 2,
  );

  it(
    "a poison message: dead-lettered with its reason within the configured receives, the conversation goes on",
    async () => {
      const id = conv();
      const poison = customerMessage(id, "cust_dave", "hello");
      (poison.payload as { customer_id: string }).customer_id = "user_13800138000";
      const fine = customerMessage(id, "cust_dave", "hello again, any news?");
      await send(poison, fine);
      await delivered(id, fine.task_id);
      await local.env.runtime.idle();

      const letters = (await readDeadLetters(local.env)).filter(
        (d) => d.eventId === poison.event_id,
      );
      expect(letters.length).toBeGreaterThanOrEqual(1);
      for (const letter of letters) {
        expect(letter.code).toBe("envelope.invalid_payload");
        expect(letter.reason).toMatch(/customer_id/);
      }
      const conversationGroup = topology.groups.find((g) => g.name === "conversation");
      const attempts = local.env.observations.errors.filter(
        (e) => e.group === "conversation" && e.message.includes("customer_id"),
      ).length;
      expect(attempts).toBeLessThanOrEqual(conversationGroup?.maxReceiveCount ?? 0);
      // Nothing of the poison was applied anywhere; the good message was.
      expect(local.env.observations.deliveries.get(poison.event_id)).toBeUndefined();
      const conversation = await local.env.store.load({ state: { type: "conversation", id } });
      expect((conversation.state?.data as ConversationState | undefined)?.version).toBe(1);
      expect(deliveriesTo(id)).toHaveLength(1);
    },
    TIMEOUT * 2,
  );
});
