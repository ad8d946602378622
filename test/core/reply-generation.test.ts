import { describe, expect, it } from "vitest";
import { TransientError } from "../../functions/core/errors";
import type { ModelPort, ModelRequest, ModelResponse } from "../../functions/core/model";
import { consume } from "../../functions/core/pipeline";
import { conversationReader } from "../../functions/roles/customer-support/conversation/conversation";
import type { ReplyDraft } from "../../functions/roles/customer-support/events/conversation";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import {
  HELD_INVALID_OUTPUT,
  HELD_REQUIRES_REVIEW,
  replyGenerationRole,
} from "../../functions/roles/customer-support/reply-generation/reply-generation";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import { clientMessage } from "./fixtures";
import {
  newConversationId,
  ofType,
  only,
  type SupportHarness,
  supportHarness,
} from "./support-fixture";

/**
 * Reply generation: the draft a model gives for a turn's facts, its validation and corrections,
 * and the send or the hold for review that follows.
 */

/** The support roles but the sender (sends are left unsent), with a model that counts its calls. */
const harness = () => supportHarness({ without: ["sender"] });

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

function draft(overrides: Partial<ReplyDraft> = {}): ReplyDraft {
  return {
    reply_text: "Your refund was submitted on 2026-08-31.",
    confidence: 0.9,
    requires_human_review: false,
    source_refs: [],
    ...overrides,
  };
}

describe("reply generation", () => {
  /** Runs the chain up to (not into) reply generation; returns the request. */
  async function requestFor(
    h: SupportHarness,
    conv: string,
    text: string,
    customer = "cust_alice",
  ) {
    const before = h.emitted.length;
    await h.drain([clientMessage(conv, text, { customer })], ["reply-generation"]);
    return only(h.emitted.slice(before), "reply.generation.requested");
  }

  function replyRole(h: SupportHarness, model: ModelPort, maxModelAttempts?: number) {
    return replyGenerationRole({
      model,
      conversation: conversationReader(h.store),
      maxModelAttempts,
    });
  }

  it("generates a reply from the facts and asks the sender to send it", async () => {
    const h = harness();
    const conv = newConversationId();
    const request = await requestFor(h, conv, "When will I get the refund for order 123?");
    const role = replyRole(h, h.model);
    const before = h.model.calls; // the refund agent's turns
    const result = await consume(request, role, h.deps);
    expect(result.status).toBe("applied");
    expect(h.model.calls - before).toBe(1);
    const [generated, send] = result.steps[0]?.emitted ?? [];
    const messageId = (request.payload as { message_event_id: string }).message_event_id;
    expect(generated?.event_type).toBe("reply.generated");
    const reply = generated?.payload as ReplyDraft;
    expect(reply.source_refs).toEqual(["order:123", "refund:123", `message:${messageId}`]);
    expect(reply.reply_text).toContain('Re: "When will I get the refund for order 123?"');
    expect(reply.reply_text).toContain("returned");
    // What the refund agent found is what the reply tells.
    expect(reply.reply_text).toContain("Your refund of 49.99 USD was submitted on 2026-08-31.");
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
    // The refund agent's request carries no deadline (a review may wait for a person): the send
    // is worth making for the reply TTL from now.
    expect(request.expires_at).toBeUndefined();
    expect(send?.expires_at).toBe("2026-09-01T10:05:00.000Z");
    expect(send?.input_version).toBe(1);
    expect(send?.order_key).toBe(conv);
    expect(send?.aggregate).toMatchObject({ type: "reply", id: request.task_id, version: 2 });
    expect(generated?.expires_at).toBeUndefined();

    // The prompt: the facts and the allowed refs, no internal ids other than the order's.
    const prompt = h.model.prompts.at(-1) ?? "";
    expect(prompt).toContain('"customer_message":"When will I get the refund for order 123?"');
    expect(prompt).toContain(`- order:123\n- refund:123\n- message:${messageId}`);
    for (const internal of [conv, request.task_id, request.correlation_id, "cust_alice"])
      expect(prompt).not.toContain(internal);

    const state = await h.state<ReplyState>("reply", request.task_id);
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
    // Nothing but the fact that the turn will get no reply, naming the turn that answers.
    expect(discarded.steps.flatMap((s) => s.emitted)).toEqual([
      expect.objectContaining({
        event_type: "support.superseded",
        task_id: stale.task_id,
        payload: { conversation_id: conv, superseded_by: fresh.task_id },
      }),
    ]);
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
    expect((await h.state<ReplyState>("reply", request.task_id))?.model_attempts).toBe(2);
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
    expect((await h.state<ReplyState>("reply", request.task_id))?.status).toBe("held_for_review");
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
    expect(await h.state<ReplyState>("reply", request.task_id)).toMatchObject({
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
    expect(await h.state("reply", request.task_id)).toBeUndefined();
    const again = await consume(request, role, h.deps, { receiveCount: 2 });
    expect(again.status).toBe("applied");
    expect(again.steps[0]?.emitted.map((e) => e.event_type)).toEqual([
      "reply.generated",
      "notification.send.requested",
    ]);
  });

  it("lets the local model's review marker drive the review path", async () => {
    const h = harness();
    await h.drain([
      clientMessage(newConversationId(), `Is order 123 refunded? ${HUMAN_REVIEW_MARKER}`),
    ]);
    const held = only(h.emitted, "reply.held_for_review");
    expect(held.payload).toMatchObject({ reason: HELD_REQUIRES_REVIEW });
    expect(ofType(h.emitted, "notification.send.requested")).toHaveLength(0);
  });
});
