import { ulid } from "ulid";
import { describe, expect, it, vi } from "vitest";
import { TransientError, VersionConflictError } from "../../functions/core/errors";
import type { ModelPort, ModelRequest } from "../../functions/core/model";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import {
  CONTEXT_MESSAGES,
  CONTEXT_WINDOW_SECONDS,
  type ConversationState,
  contextWindow,
} from "../../functions/roles/customer-support/conversation/conversation";
import { routeTexts } from "../../functions/roles/customer-support/router/router";
import type { Envelope } from "../../schemas";
import { referenceLocalModel } from "../support/reference";
import { clientMessage } from "./fixtures";
import { newConversationId, only, type SupportHarness, supportHarness } from "./support-fixture";

const COMMANDS = [
  "support.route.requested",
  "order.lookup.requested",
  "reply.generation.requested",
];

describe("conversation context", () => {
  it("answers two messages in quick succession once, about the order the second names, from both", async () => {
    const prompts: ModelRequest[] = [];
    const local = referenceLocalModel();
    const model = {
      name: local.name,
      converse: (request: ModelRequest) => {
        prompts.push(request);
        return local.converse(request);
      },
    };
    const h = supportHarness({ model, without: ["sender", "conversation-projection"] });
    const conv = newConversationId();
    const first = clientMessage(conv, "I want to check my order");
    const second = clientMessage(conv, "the order number is A-1002");
    // Both messages are taken in before any command is handled (they came in quick succession).
    const accepted: Envelope[] = [];
    for (const message of [first, second]) {
      const result = await consume(message, h.conversation as Role<unknown>, h.deps);
      accepted.push(...(result.steps[0]?.emitted ?? []));
      h.clock.advance(20_000);
    }
    await h.drain(accepted);
    const emitted = [...accepted, ...h.emitted];

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

describe("reply generation's reads of the conversation", () => {
  /** The loads of conversation state the store serves from now on. */
  function conversationReads(h: SupportHarness): () => number {
    const load = vi.spyOn(h.store, "load");
    return () =>
      load.mock.calls.filter(([request]) => request.state?.type === "conversation").length;
  }

  async function requestOf(h: SupportHarness, conv: string, text: string): Promise<Envelope> {
    const before = h.emitted.length;
    await h.drain([clientMessage(conv, text)], ["reply-generation"]);
    return only(h.emitted.slice(before), "reply.generation.requested");
  }

  it("reads it once per request: the superseded check and the context share one read", async () => {
    const h = supportHarness({ without: ["sender"] });
    const conv = newConversationId();
    const stale = await requestOf(h, conv, "Where is order 123?");
    const current = await requestOf(h, conv, "Sorry, I meant order 456");
    const reads = conversationReads(h);

    expect(await consume(stale, h.replyGeneration, h.deps)).toMatchObject({
      status: "discarded",
      reason: "superseded",
    });
    expect(reads()).toBe(1);
    expect((await consume(current, h.replyGeneration, h.deps)).status).toBe("applied");
    expect(reads()).toBe(2);
  });

  it("reads it again on each new delivery and on each round retried after a commit conflict", async () => {
    const throttled = new TransientError("model.throttled", "slow down");
    const local = referenceLocalModel();
    let failures = 1;
    const model: ModelPort = {
      name: local.name,
      converse: (request) => (failures-- > 0 ? Promise.reject(throttled) : local.converse(request)),
    };
    const h = supportHarness({ model, without: ["sender"] });
    const request = await requestOf(h, newConversationId(), "Where is order 123?");
    const reads = conversationReads(h);

    await expect(consume(request, h.replyGeneration, h.deps)).rejects.toBe(throttled);
    expect(reads()).toBe(1);
    // The redelivery loses its first commit to a concurrent writer: the pipeline decides again.
    vi.spyOn(h.store, "commit").mockRejectedValueOnce(
      new VersionConflictError("state", "another commit came first"),
    );
    const again = await consume(request, h.replyGeneration, h.deps, { receiveCount: 2 });
    expect(again.status).toBe("applied");
    expect(reads()).toBe(3);
  });
});
