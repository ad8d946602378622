import { describe, expect, it } from "vitest";
import { type LocalScript, ToolUse } from "../../functions/adapters/local-model";
import type { ModelRequest } from "../../functions/core/model";
import { OUTPUT_GUARD_REFUSED } from "../../functions/core/output-guard";
import type { ReplyDraft } from "../../functions/roles/customer-support/events/conversation";
import { replyGeneration } from "../../functions/roles/customer-support/reply-generation/local-script";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import { refundReview } from "../../functions/roles/refund-review/local-script";
import { referenceLocalModel } from "../support/reference";
import { clientMessage } from "./fixtures";
import { newConversationId, only, supportHarness } from "./support-fixture";

/**
 * The output guard on the support chain, in memory, with the local model scripted to leak into
 * its reply: an internal id is withheld and the reply sent; a key, another customer's e-mail or
 * the order's raw record hold the reply for a person, and the customer receives nothing of the
 * model's that turn. The leaked text reaches no event, no view and no channel; the turn is not
 * lost (its reply is sent, or held with the guard's findings as the reason). The refund agent's
 * reason, scripted to leak the same way, is guarded before it reaches the reply: the refund it
 * made stands, and a refused reason holds the turn's reply for a person.
 */

const FAKE_KEY = "AKIAIOSFODNN7EXAMPLE";
const BOB = "bob@example.com";
/** A task id of no turn of these tests: an internal id a model might have picked up. */
const TASK_OF_ANOTHER_RUN = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";

/** The message event id the prompt cites (`message:<id>`): an internal id the model has seen. */
function citedMessageId(request: ModelRequest): string {
  return /message:([0-9A-Z]{26})/.exec(request.messages[0]?.text ?? "")?.[1] ?? "";
}

/** The order facts as the prompt gives them (the facts line's `order`). */
function orderFacts(request: ModelRequest): string {
  const line = (request.messages[0]?.text ?? "").split("\n").find((l) => l.startsWith("{")) ?? "";
  return JSON.stringify((JSON.parse(line) as { order?: unknown }).order ?? {});
}

/** The local model's reply script, with `leak(request)` added at the end of the reply's text. */
function leaking(leak: (request: ModelRequest) => string): LocalScript {
  return (request, facts) => {
    const draft = replyGeneration(request, facts);
    return { ...draft, reply_text: `${draft.reply_text} ${leak(request)}` };
  };
}

async function turnWith(leak: (request: ModelRequest) => string) {
  const h = supportHarness({
    model: referenceLocalModel({ scripts: { "reply-generation": leaking(leak) } }),
  });
  const conv = newConversationId();
  await h.drain([clientMessage(conv, "Where is my order 123?")]);
  const generated = only(h.emitted, "reply.generated");
  const leaked = leak({ ...capturedPrompt(h.model.prompts.at(-1) ?? "") });
  return { h, conv, generated, leaked };
}

/** A request rebuilt from a prompt the harness kept, to compute what the script leaked. */
function capturedPrompt(prompt: string): ModelRequest {
  return { messages: [{ role: "user", text: prompt }] } as ModelRequest;
}

/** The events that carry a reply's text (the conversation's view folds them). */
const REPLY_EVENTS = ["reply.generated", "reply.held_for_review", "notification.send.requested"];

/** No reply event's text, no turn of the conversation's view and no delivery holds `leaked`. */
async function expectNowhere(h: ReturnType<typeof supportHarness>, conv: string, leaked: string) {
  expect(leaked.length).toBeGreaterThan(8);
  const replies = h.emitted.filter((e) => REPLY_EVENTS.includes(e.event_type));
  expect(replies.length).toBeGreaterThan(0);
  for (const event of replies) {
    const { reply_text, text } = event.payload as { reply_text?: string; text?: string };
    expect(reply_text ?? text).not.toContain(leaked);
  }
  for (const turn of Object.values((await h.view(conv))?.turns ?? {}))
    expect(JSON.stringify(turn)).not.toContain(leaked);
  for (const delivery of h.channel.deliveries()) expect(delivery.text).not.toContain(leaked);
}

describe("the output guard on reply generation", () => {
  it("withholds an internal id and sends the rest of the reply", async () => {
    const { h, conv, generated, leaked } = await turnWith(citedMessageId);
    const reply = generated.payload as ReplyDraft & { output_guard: unknown };
    expect(reply.reply_text).toMatch(/ \[withheld: internal id\]$/);
    expect(reply.output_guard).toMatchObject({
      verdict: "redact",
      findings: [{ kind: "internal_id" }],
    });
    const [delivery] = h.channel.deliveries();
    expect(delivery?.text).toBe(reply.reply_text);
    expect(delivery?.text).toContain("Order 123 (Wireless earbuds) is returned.");
    await expectNowhere(h, conv, leaked);
  });

  it("lets the customer's own words come back: an address they wrote is no leak", async () => {
    const text = "Please refund order 456, and write to bob.home@example.com";
    const { completed, request } = await refundTurnWith(() => "bob.home@example.com", text);
    expect(completed.payload).toMatchObject({
      decision: "approved",
      reason: "Your refund has been issued. bob.home@example.com",
      output_guard: { verdict: "pass", findings: [] },
    });
    expect(request.payload).not.toHaveProperty("hold_reason");
  });

  for (const [name, leak, kind] of [
    ["an AWS access key id", () => FAKE_KEY, "secret"],
    ["another customer's e-mail address", () => BOB, "other_customer_data"],
    ["the order's raw record", orderFacts, "raw_tool_output"],
  ] as const)
    it(`holds a reply with ${name} for a person; the customer receives nothing`, async () => {
      const { h, conv, generated, leaked } = await turnWith(leak);
      const held = only(h.emitted, "reply.held_for_review");
      const reason = (held.payload as { reason: string }).reason;
      expect(reason).toMatch(new RegExp(`^${OUTPUT_GUARD_REFUSED}: ${kind} \\(`));
      expect((generated.payload as { output_guard: unknown }).output_guard).toMatchObject({
        verdict: "refuse",
      });
      expect(h.emitted.some((e) => e.event_type === "notification.send.requested")).toBe(false);
      expect(h.channel.deliveries()).toEqual([]);
      // Nothing lost: the held reply keeps the draft with the finding withheld, for a person.
      const state = await h.state<ReplyState>("reply", held.task_id);
      expect(state).toMatchObject({ status: "held_for_review", reason });
      expect(state?.reply_text).toContain(`[withheld: ${kind.replaceAll("_", " ")}]`);
      expect(state?.reply_text).toContain("Order 123 (Wireless earbuds) is returned.");
      expect((await h.view(conv))?.turns[held.task_id]?.status).toBe("held_for_review");
      await expectNowhere(h, conv, leaked);
    });

  it("lets the local model's own replies through untouched", async () => {
    const h = supportHarness();
    await h.drain([
      clientMessage(newConversationId(), "Where is my order 123?"),
      clientMessage(newConversationId(), "Please refund order 456", { customer: "cust_bob" }),
    ]);
    const verdicts = h.emitted
      .filter((e) => e.event_type === "reply.generated")
      .map((e) => (e.payload as { output_guard?: { verdict: string } }).output_guard?.verdict);
    expect(verdicts).toEqual(["pass", "pass"]);
    expect(h.channel.deliveries()).toHaveLength(2);
  });
});

/** The get_order output the refund agent's model saw (its latest tool results). */
function getOrderOutput(request: ModelRequest): string {
  const results = request.messages.flatMap((m) => m.toolResults ?? []);
  return JSON.stringify(results[0]?.content ?? {});
}

/** The local model's refund script, with `leak(request)` added at the end of its answer's reason. */
function leakingReason(leak: (request: ModelRequest) => string): LocalScript {
  return (request) => {
    const answer = refundReview(request);
    if (answer instanceof ToolUse || typeof answer !== "object" || !("reason" in answer))
      return answer;
    return { ...answer, reason: `${String(answer.reason)} ${leak(request)}` };
  };
}

/** Bob asks for the refund of his order 456 (delivered): the refund agent refunds it. */
async function refundTurnWith(
  leak: (request: ModelRequest) => string,
  text = "Please refund order 456",
) {
  let leaked = "";
  const h = supportHarness({
    model: referenceLocalModel({
      scripts: {
        "refund-review": leakingReason((request) => {
          leaked = leak(request);
          return leaked;
        }),
      },
    }),
  });
  const conv = newConversationId();
  await h.drain([clientMessage(conv, text, { customer: "cust_bob" })]);
  const completed = only(h.emitted, "refund.review.completed");
  const request = only(h.emitted, "reply.generation.requested");
  return { h, conv, completed, request, leaked };
}

describe("the output guard on the refund agent's reason", () => {
  it("withholds an internal id; the refund stands and the reply is sent", async () => {
    const { h, conv, completed, request, leaked } = await refundTurnWith(() => TASK_OF_ANOTHER_RUN);
    expect(completed.payload).toMatchObject({
      decision: "approved",
      reason: "Your refund has been issued. [withheld: internal id]",
      output_guard: { verdict: "redact", findings: [{ kind: "internal_id" }] },
    });
    expect(request.payload).not.toHaveProperty("hold_reason");
    only(h.emitted, "refund.approved");
    const [delivery] = h.channel.deliveries();
    expect(delivery?.text).toContain("Your refund has been issued. [withheld: internal id]");
    await expectNowhere(h, conv, leaked);
  });

  it("lets the customer's own words come back: an address they wrote is no leak", async () => {
    const text = "Please refund order 456, and write to bob.home@example.com";
    const { completed, request } = await refundTurnWith(() => "bob.home@example.com", text);
    expect(completed.payload).toMatchObject({
      decision: "approved",
      reason: "Your refund has been issued. bob.home@example.com",
      output_guard: { verdict: "pass", findings: [] },
    });
    expect(request.payload).not.toHaveProperty("hold_reason");
  });

  for (const [name, leak, kind] of [
    ["an AWS access key id", () => FAKE_KEY, "secret"],
    ["another customer's e-mail address", () => "alice@example.com", "other_customer_data"],
    ["the raw output of get_order", getOrderOutput, "raw_tool_output"],
  ] as const)
    it(`refuses a reason with ${name}: the refund stands, the reply is held for a person`, async () => {
      const { h, conv, completed, request, leaked } = await refundTurnWith(leak);
      expect(completed.payload).toMatchObject({
        decision: "approved",
        output_guard: { verdict: "refuse" },
      });
      const holdReason = (request.payload as { hold_reason?: string }).hold_reason ?? "";
      expect(holdReason).toMatch(new RegExp(`^${OUTPUT_GUARD_REFUSED}: ${kind} \\(`));
      // Nothing lost: the refund was made once, and the reply waits for a person's review.
      only(h.emitted, "refund.approved");
      const held = only(h.emitted, "reply.held_for_review");
      expect((held.payload as { reason: string }).reason).toBe(holdReason);
      expect(h.channel.deliveries()).toEqual([]);
      for (const type of ["refund.review.completed", "reply.generation.requested"])
        for (const event of h.emitted.filter((e) => e.event_type === type))
          expect(JSON.stringify(event.payload)).not.toContain(leaked);
      await expectNowhere(h, conv, leaked);
    });
});
