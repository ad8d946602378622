import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { DeterministicLocalModel } from "../../functions/adapters/local-model";
import type { ModelRequest } from "../../functions/core/model";
import { consume, type Role } from "../../functions/core/pipeline";
import {
  CONTEXT_MESSAGES,
  CONTEXT_WINDOW_SECONDS,
  type ConversationState,
  contextWindow,
  conversation,
  conversationContextReader,
  conversationVersionReader,
} from "../../functions/roles/conversation";
import { createOrderLookup, ordersFrom } from "../../functions/roles/order-lookup";
import { createReplyGeneration } from "../../functions/roles/reply-generation";
import { createRouter, routeTexts } from "../../functions/roles/router";
import { SAMPLE_ORDERS } from "../../lib/local/orders";
import type { Envelope } from "../../schemas";
import { clientMessage, makeDeps } from "./fixtures";

const COMMANDS = [
  "support.route.requested",
  "order.lookup.requested",
  "reply.generation.requested",
];

describe("conversation context", () => {
  it("answers two messages in quick succession once, about the order the second names, from both", async () => {
    const { deps, store, clock } = makeDeps();
    const prompts: ModelRequest[] = [];
    const local = new DeterministicLocalModel();
    const model = {
      name: local.name,
      converse: (request: ModelRequest) => {
        prompts.push(request);
        return local.converse(request);
      },
    };
    const context = conversationContextReader(store);
    const roles = [
      conversation,
      createRouter({ context }),
      createOrderLookup({ orders: ordersFrom(SAMPLE_ORDERS) }),
      createReplyGeneration({
        model,
        conversationVersion: conversationVersionReader(store),
        context,
      }),
    ] as Role<unknown>[];
    const conv = `conv_${ulid()}`;
    const first = clientMessage(conv, "I want to check my order");
    const second = clientMessage(conv, "the order number is A-1002");
    const emitted: Envelope[] = [];
    // Both messages are taken in before any command is handled (they came in quick succession).
    const queue: Envelope[] = [];
    for (const message of [first, second]) {
      const accepted = await consume(message, conversation as Role<unknown>, deps);
      queue.push(...(accepted.steps[0]?.emitted ?? []));
      emitted.push(...(accepted.steps[0]?.emitted ?? []));
      clock.advance(20_000);
    }
    for (let event = queue.shift(); event; event = queue.shift()) {
      for (const role of roles.slice(1)) {
        if (!role.subscriptions.includes(event.event_type)) continue;
        const result = await consume(event, role, deps);
        for (const step of result.steps) {
          emitted.push(...step.emitted);
          queue.push(...step.emitted);
        }
      }
    }

    const routed = emitted.filter((e) => e.event_type === "support.routed");
    expect(routed.map((e) => [e.task_id, e.payload])).toEqual([
      [first.task_id, expect.objectContaining({ intent: "general" })],
      [second.task_id, expect.objectContaining({ intent: "order_status", order_id: "A-1002" })],
    ]);
    // The first turn's reply request was superseded by the second message: one reply.
    const sends = emitted.filter((e) => e.event_type === "notification.send.requested");
    expect(sends.map((e) => e.task_id)).toEqual([second.task_id]);
    const generated = emitted.find((e) => e.event_type === "reply.generated");
    const draft = generated?.payload as { reply_text: string; source_refs: string[] };
    expect(draft.reply_text).toContain("Order A-1002 (Rain jacket, size M) is placed.");
    expect(draft.source_refs).toEqual(
      expect.arrayContaining([
        "order:A-1002",
        `message:${first.event_id}`,
        `message:${second.event_id}`,
      ]),
    );
    expect(prompts).toHaveLength(1);
    const prompt = prompts[0]?.messages[0]?.text ?? "";
    expect(prompt).toContain("I want to check my order");
    expect(prompt).toContain("the order number is A-1002");
    // No command carried the customer's text.
    const commands = emitted.filter((e) => COMMANDS.includes(e.event_type));
    expect(commands).toHaveLength(5);
    for (const command of commands) {
      const payload = JSON.stringify(command.payload);
      expect(payload, command.event_type).not.toContain("check my order");
      expect(payload, command.event_type).not.toContain("the order number is");
    }
  });

  it("routes on the merged intent: refund words in an earlier message, the order in the newest", () => {
    expect(routeTexts(["I want a refund", "the order number is A-1002"])).toEqual({
      intent: "refund",
      order_id: "A-1002",
      rule: "order_number_with_refund_words",
    });
    expect(routeTexts(["order 123 please", "no wait, order 456"])).toMatchObject({
      order_id: "456",
    });
  });

  it("bounds the window: at most 5 messages, none older than 2 minutes before the turn's own", () => {
    const at = (seconds: number) => new Date(Date.UTC(2026, 8, 1, 10, 0, seconds)).toISOString();
    const messages = Array.from({ length: 8 }, (_, i) => ({
      version: i + 1,
      task_id: `task_${i}`,
      text: `message ${i + 1}`,
      message_event_id: ulid(),
      received_at: at(i === 3 ? 0 : 200 + i),
    }));
    const state: ConversationState = {
      conversation_id: "conv_1",
      customer_id: "cust_alice",
      version: 8,
      messages,
    };
    const window = contextWindow(state, "conv_1", 7);
    expect(CONTEXT_MESSAGES).toBe(5);
    expect(CONTEXT_WINDOW_SECONDS).toBe(120);
    // Versions 3-7 are the last five through 7; version 4 was received long before version 7.
    expect(window.map((m) => m.version)).toEqual([3, 5, 6, 7]);
    expect(() => contextWindow(state, "conv_1", 9)).toThrow(
      expect.objectContaining({ code: "conversation.context_missing" }),
    );
  });
});
