import { describe, expect, it } from "vitest";
import { z } from "zod";
import { DeterministicLocalModel, LOCAL_MODEL_NAME } from "../../functions/adapters/local-model";
import { AgentBusError, PermanentError, TransientError } from "../../functions/core/errors";
import {
  invokeStructured,
  ModelOutputInvalidError,
  type ModelRequest,
} from "../../functions/core/model";
import {
  CLAIM_HEADING,
  PREVIOUS_ROUND_HEADING,
} from "../../functions/roles/content-agents/headings";
import {
  FAIL_FACT_CHECK_MARKER,
  NEEDS_REVISION_MARKER,
  REVISED_DRAFT,
  UNSOURCED_CLAIM,
} from "../../functions/roles/content-agents/local-scripts";
import type { ReplyGenerationRequested } from "../../functions/roles/customer-support/events/commands";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import {
  allowedSourceRefs,
  replyDraftSchema,
  replyPrompt,
} from "../../functions/roles/customer-support/reply-generation/reply-generation";
import { referenceLocalModel } from "../support/reference";

const TopicSelection = z.strictObject({
  topic: z.string().min(1),
  angle: z.string().min(1),
  sources: z.array(z.string().min(1)).min(1),
  claims: z.array(z.string().min(1)).min(3).max(4),
});
const FactCheck = z.strictObject({
  verdict: z.enum(["pass", "fail"]),
  checked_claims: z.number().int().nonnegative(),
  notes: z.string().min(1),
});
const Writing = z.strictObject({ title: z.string().min(1), body: z.string().min(1) });
const Review = z.strictObject({
  approved: z.literal(true),
  edits: z.number().int().nonnegative(),
  final_title: z.string().min(1),
  final_body: z.string().min(1),
});
const Rejection = z.strictObject({
  approved: z.literal(false),
  edits: z.number().int().nonnegative(),
  final_title: z.string().min(1),
  final_body: z.string().min(1),
  notes: z.string().min(1),
});
const ReplyGeneration = z.strictObject({
  reply_text: z.string().min(1),
  confidence: z.number().min(0).max(1),
  requires_human_review: z.literal(false),
  source_refs: z.array(z.string().min(1)),
});

const SCHEMAS = {
  "topic-selection": TopicSelection,
  "fact-check": FactCheck,
  writing: Writing,
  review: Review,
  "reply-generation": ReplyGeneration,
} as const;

function ask(role: string, text: string, system?: string): ModelRequest {
  return {
    ...(system === undefined ? {} : { system }),
    messages: [{ role: "user", text }],
    metadata: { role, task_id: "task-1", correlation_id: "corr-1" },
  };
}

const INPUTS = [
  "Energy storage for a quick news piece",
  "Long form on rural broadband",
  "Customer asks why they were charged twice",
  "Transit data openness",
  "Water reuse in dry cities",
];

describe("DeterministicLocalModel", () => {
  it("is named as what it is", () => {
    const model = new DeterministicLocalModel();
    expect(model.name).toBe("deterministic-local-model");
    expect(LOCAL_MODEL_NAME).toBe(model.name);
  });

  it("answers the same request with the same text, across instances", async () => {
    for (const role of Object.keys(SCHEMAS)) {
      const a = await referenceLocalModel().converse(ask(role, INPUTS[0] ?? ""));
      const b = await referenceLocalModel().converse(ask(role, INPUTS[0] ?? ""));
      expect(b).toEqual(a);
      expect(a.modelId).toBe(LOCAL_MODEL_NAME);
      expect(a.stopReason).toBe("end_turn");
      expect(a.usage.inputTokens).toBeGreaterThan(0);
      expect(a.usage.outputTokens).toBeGreaterThan(0);
    }
  });

  it("answers different inputs differently", async () => {
    const model = referenceLocalModel();
    for (const role of Object.keys(SCHEMAS)) {
      const texts = new Set<string>();
      for (const input of INPUTS) texts.add((await model.converse(ask(role, input))).text);
      expect(texts.size).toBe(INPUTS.length);
    }
  });

  it("gives outputs of every default script that validate against the role's schema", async () => {
    const model = referenceLocalModel();
    for (const [role, schema] of Object.entries(SCHEMAS)) {
      for (const input of INPUTS) {
        const { text } = await model.converse(ask(role, input));
        const parsed = schema.safeParse(JSON.parse(text));
        expect(parsed.success, `${role} on "${input}": ${text}`).toBe(true);
      }
    }
    // Also through invokeStructured, in one attempt.
    const result = await invokeStructured(model, ask("writing", "anything"), Writing);
    expect(result.attempts).toBe(1);
  });

  it("answers each content agent under its own name only", async () => {
    const model = referenceLocalModel();
    for (const role of ["topic-selection", "fact-check", "writing", "review"] as const) {
      const { text } = await model.converse(ask(role, "x"));
      expect(SCHEMAS[role].safeParse(JSON.parse(text)).success).toBe(true);
    }
    await expect(model.converse(ask("writer", "x"))).rejects.toMatchObject({
      code: "model.no_script",
    });
  });

  it("fails the fact check when the request carries the marker", async () => {
    const model = referenceLocalModel();
    for (const input of INPUTS) {
      const pass = FactCheck.parse(
        JSON.parse((await model.converse(ask("fact-check", input))).text),
      );
      expect(pass.verdict).toBe("pass");
      const failed = FactCheck.parse(
        JSON.parse(
          (await model.converse(ask("fact-check", `${input} ${FAIL_FACT_CHECK_MARKER}`))).text,
        ),
      );
      expect(failed.verdict).toBe("fail");
    }
    expect(FAIL_FACT_CHECK_MARKER).toBe("[fail-fact-check]");
    // The marker counts in the system prompt too.
    const { text } = await model.converse(ask("fact-check", "claims", "[fail-fact-check]"));
    expect(FactCheck.parse(JSON.parse(text)).verdict).toBe("fail");
  });

  it("lets the reviewer keep the writer's title and body when the draft is in the request", async () => {
    const model = referenceLocalModel();
    const draft = JSON.stringify({ title: 'Grid storage, "explained"', body: "One.\n\nTwo." });
    const { text } = await model.converse(ask("review", `Review this draft: ${draft}`));
    expect(Review.parse(JSON.parse(text))).toMatchObject({
      final_title: 'Grid storage, "explained"',
      final_body: "One.\n\nTwo.",
    });
  });

  it("states N claims no source backs on [disputed-claims:N], and fails the check of one", async () => {
    const model = referenceLocalModel();
    const answer = async (role: string, text: string) =>
      JSON.parse((await model.converse(ask(role, text))).text);
    const topic = TopicSelection.parse(
      await answer("topic-selection", "[disputed-claims:2] tides"),
    );
    expect(topic.claims.map((c) => c.includes(UNSOURCED_CLAIM))).toEqual(
      topic.claims.map((_, i) => i === 1 || i === 2),
    );
    const sound = TopicSelection.parse(await answer("topic-selection", "tides"));
    expect(sound.claims.some((c) => c.includes(UNSOURCED_CLAIM))).toBe(false);
    const check = (claim: string) =>
      answer("fact-check", `${CLAIM_HEADING} (1 of 3):\n${JSON.stringify(claim)}`);
    expect(FactCheck.parse(await check(topic.claims[1] ?? ""))).toMatchObject({
      verdict: "fail",
      checked_claims: 1,
    });
    expect(FactCheck.parse(await check(topic.claims[0] ?? "")).verdict).toBe("pass");
  });

  it("on [needs-revision] rejects a first draft with notes, and approves the writer's revision", async () => {
    const model = referenceLocalModel();
    const answer = async (role: string, text: string) =>
      JSON.parse((await model.converse(ask(role, text))).text);
    const request = `{"topic_hint":"${NEEDS_REVISION_MARKER} tides"}`;
    const draft = Writing.parse(await answer("writing", request));
    const rejected = Rejection.parse(
      await answer("review", `${request}\n${JSON.stringify({ writing: draft })}`),
    );
    const previous = JSON.stringify({ review: rejected, writing: draft });
    const revised = Writing.parse(
      await answer("writing", `${request}\n\n${PREVIOUS_ROUND_HEADING}, by step:\n${previous}`),
    );
    expect(revised.body).toContain(`${REVISED_DRAFT} ${rejected.notes}`);
    const approved = Review.parse(
      await answer("review", `${request}\n${JSON.stringify({ writing: revised })}`),
    );
    expect(approved.final_body).toBe(revised.body);
    // Without the marker, the first draft is approved.
    expect(Review.parse(await answer("review", JSON.stringify({ writing: draft }))).approved).toBe(
      true,
    );
  });

  it("failNext throws the given error once, then answers again", async () => {
    const model = referenceLocalModel();
    const throttled = new TransientError("model.throttled", "injected");
    model.failNext("writing", throttled);
    await expect(model.converse(ask("writing", "x"))).rejects.toBe(throttled);
    // Other roles are not affected.
    await expect(model.converse(ask("review", "x"))).resolves.toBeDefined();
    const { text } = await model.converse(ask("writing", "x"));
    expect(Writing.safeParse(JSON.parse(text)).success).toBe(true);
    expect(model.callCount("writing")).toBe(2);
  });

  it("invalidNext answers non-JSON text count times, which invokeStructured retries", async () => {
    const model = referenceLocalModel();
    model.invalidNext("topic-selection", 2);
    const result = await invokeStructured(model, ask("topic-selection", "x"), TopicSelection);
    expect(result.attempts).toBe(3);

    model.invalidNext("topic-selection", 3);
    const error = await invokeStructured(model, ask("topic-selection", "x"), TopicSelection).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ModelOutputInvalidError);
    expect((error as ModelOutputInvalidError).code).toBe("model.invalid_output");
    expect(() => JSON.parse((error as ModelOutputInvalidError).rawText)).toThrow();
  });

  it("refuses an unknown role, or no role, with permanent model.no_script", async () => {
    const model = referenceLocalModel();
    for (const request of [ask("astrologer", "x"), { messages: [{ role: "user", text: "x" }] }]) {
      const error = await model.converse(request as ModelRequest).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PermanentError);
      expect(error).toMatchObject({ code: "model.no_script", errorClass: "permanent" });
    }
  });

  it("takes scripts of a test's own (string or object), over the roles' own", async () => {
    const model = referenceLocalModel({
      scripts: {
        echo: (request) => `echo: ${request.messages.at(-1)?.text ?? ""}`,
        writing: (_request, facts) => ({ title: "Fixed", body: facts.digest.slice(0, 4) }),
      },
      latencyMs: 25,
    });
    const echoed = await model.converse(ask("echo", "hello"));
    expect(echoed.text).toBe("echo: hello");
    expect(echoed.latencyMs).toBe(25);
    expect(Writing.parse(JSON.parse((await model.converse(ask("writing", "x"))).text)).title).toBe(
      "Fixed",
    );
    await expect(model.converse(ask("review", "x"))).resolves.toBeDefined();
  });

  it("knows no role of its own: each comes with its script, registered", async () => {
    const bare = new DeterministicLocalModel();
    await expect(bare.converse(ask("review", "x"))).rejects.toBeInstanceOf(AgentBusError);
    const echo = (request: ModelRequest) => `echo: ${request.messages.at(-1)?.text ?? ""}`;
    bare.register({ echo });
    expect((await bare.converse(ask("echo", "hi"))).text).toBe("echo: hi");
    // The same script again is no change; another one for the role is refused, naming it.
    bare.register({ echo });
    expect(() => bare.register({ echo: () => "other", fresh: echo })).toThrow(
      expect.objectContaining({ code: "model.script_clash", details: { roles: ["echo"] } }),
    );
    await expect(bare.converse(ask("fresh", "x"))).rejects.toMatchObject({
      code: "model.no_script",
    });
  });

  describe("reply-generation script", () => {
    const turn = {
      conversation_id: "conv_demo",
      customer_id: "cust_alice",
      channel: "chat",
      message_event_id: "01JAAAAAAAAAAAAAAAAAAAAAAA",
      context_version: 1,
    };
    /** A request and the text of its message (which reply generation reads from its context). */
    type Asked = ReplyGenerationRequested & { readonly text: string };
    const withOrder: Asked = {
      ...turn,
      text: "When do I get my refund for order 123? I returned the earbuds two weeks ago already.",
      intent: "refund",
      order_id: "123",
      order: {
        order_id: "123",
        customer_id: "cust_alice",
        status: "returned",
        item: "Wireless earbuds",
        total_cents: 4999,
        currency: "USD",
        refund: { status: "submitted", amount_cents: 4999, updated_at: "2026-08-31T09:30:00Z" },
      },
    };

    async function reply({ text, ...request }: Asked) {
      const messages = [{ message_event_id: request.message_event_id, text }];
      const allowed = allowedSourceRefs(request, messages);
      const result = await invokeStructured(
        referenceLocalModel(),
        ask("reply-generation", replyPrompt(request, messages, allowed)),
        replyDraftSchema(allowed),
      );
      expect(result.attempts).toBe(1);
      return result.value;
    }

    it("quotes the message and the order facts, citing only allowed refs", async () => {
      const value = await reply(withOrder);
      expect(value.reply_text).toContain(
        'Re: "When do I get my refund for order 123? I returned the earbu…"',
      );
      expect(value.reply_text).toContain("Order 123 (Wireless earbuds) is returned.");
      expect(value.reply_text).toContain("Refund status: submitted (49.99 USD).");
      expect(value.source_refs).toEqual([
        "order:123",
        "refund:123",
        "message:01JAAAAAAAAAAAAAAAAAAAAAAA",
      ]);
      expect(value.requires_human_review).toBe(false);
    });

    it("says when the order was not found and cites only the message", async () => {
      const { order: _order, ...notFound } = withOrder;
      const value = await reply({
        ...notFound,
        text: "Where is order 999?",
        intent: "order_status",
        order_id: "999",
      });
      expect(value.reply_text).toContain('Re: "Where is order 999?"');
      expect(value.reply_text).toContain("could not find order 999");
      expect(value.source_refs).toEqual(["message:01JAAAAAAAAAAAAAAAAAAAAAAA"]);
    });

    it("asks for a human review when the request carries the marker", async () => {
      const value = await reply({ ...withOrder, text: `Refund order 123 ${HUMAN_REVIEW_MARKER}` });
      expect(value.requires_human_review).toBe(true);
      expect(HUMAN_REVIEW_MARKER).toBe("[human-review]");
    });
  });
});
