import * as fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ToolUse } from "../../functions/adapters/local-model";
import type {
  ModelPort,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
} from "../../functions/core/model";
import { refundDesk } from "./refund-desk";

/**
 * A model's answer is untrusted input: however many tool calls it asks for, whatever it names
 * them, however large or odd it is, each step of the refund agent commits through the pipeline: a
 * turn that cannot be taken becomes an error turn the model reads, and too many in a row hand the
 * run to a person (NEEDS_HUMAN). No step is dead-lettered and no run stays RUNNING with no step
 * to take.
 */

const lookUp = (turn: number) =>
  new ToolUse([
    { id: `call_${turn}_1`, name: "get_order", input: { order_id: "A-1001" } },
    { id: `call_${turn}_2`, name: "get_refund_status", input: { order_id: "A-1001" } },
  ]);

const turnOf = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === "assistant").length + 1;

const lastUserText = (request: ModelRequest) =>
  request.messages.filter((m) => m.role === "user").at(-1)?.text ?? "";

/** A reviewer whose first turn is `first`; then it looks the order (in transit) up and refuses. */
function firstTurnThen(first: ToolUse | string) {
  const told: string[] = [];
  const script = (request: ModelRequest) => {
    const turn = turnOf(request);
    if (turn === 1) return first;
    told.push(lastUserText(request));
    if (turn === 2) return lookUp(turn);
    return { decision: "rejected", reason: "Your order is on its way." };
  };
  return { script, told };
}

const calls = (count: number, name = "get_order"): ModelToolCall[] =>
  Array.from({ length: count }, (_, i) => ({
    id: `call_1_${i}`,
    name,
    input: { order_id: "A-1001" },
  }));

describe("a model turn the run cannot take", () => {
  it.each([
    ["33 tool calls", new ToolUse(calls(33)), /33 tool calls.*at most 32/],
    ["a tool name of 65 characters", new ToolUse(calls(1, "g".repeat(65))), /64 characters/],
    [
      "a tool call id of 129 characters",
      new ToolUse([{ ...calls(1)[0], id: "c".repeat(129) } as ModelToolCall]),
      /128 characters/,
    ],
    ["two tool calls with one id", new ToolUse([...calls(1), ...calls(1)]), /distinct/],
    ["an answer of a megabyte", "x".repeat(1_000_000), /bytes/],
  ] as const)(
    "%s: an error turn the model reads, nothing run, and the run goes on to its answer",
    async (_label, first, told) => {
      const reviewer = firstTurnThen(first);
      const desk = refundDesk({}, reviewer.script);
      await desk.ask("A-1001", "Please refund my shoes");
      await desk.drain();
      expect(reviewer.told[0]).toMatch(/^Your turn was not taken: /);
      expect(reviewer.told[0]).toMatch(told);
      const journal = await desk.journal();
      expect(journal?.status).toBe("COMPLETED");
      expect(journal?.totals).toMatchObject({ model_turns: 3, tool_calls: 2 });
      expect(desk.facts("refund.rejected")).toHaveLength(1);
      expect(desk.payments.calls).toBe(0);
    },
  );

  it("turn after turn of them hands the run to a person, who is asked with a fact, and the customer told the person's answer", async () => {
    const desk = refundDesk({}, () => new ToolUse(calls(40, "x".repeat(80))));
    await desk.ask("A-1001", "Please refund my shoes");
    await desk.drain();
    const journal = await desk.journal();
    expect(journal?.status).toBe("NEEDS_HUMAN");
    expect(journal?.totals.model_turns).toBe(3);
    expect(desk.nextSteps()).toEqual([]);
    expect(desk.facts("refund.review.needs_person")[0]?.payload).toMatchObject({
      waiting: "answer",
    });
    // The customer is told once, what the person answers.
    expect(desk.facts("reply.generation.requested")).toEqual([]);
    const reason = "A colleague checked your order: it is refunded once it is back with us.";
    await desk.decide({ decision: "answer", output: { decision: "rejected", reason } });
    expect((await desk.journal())?.status).toBe("COMPLETED");
    const replies = desk.facts("reply.generation.requested");
    expect(replies).toHaveLength(1);
    expect(replies[0]?.payload).toMatchObject({ refund_review: { decision: "rejected", reason } });
  });
});

/** Answers of every shape a model port might give, valid and not. */
const toolCall = fc.record({
  id: fc.oneof(
    fc.constantFrom("call_1", "call_2", ""),
    fc.string({ maxLength: 20 }),
    fc.string({ minLength: 120, maxLength: 300 }),
  ),
  name: fc.oneof(
    fc.constantFrom("get_order", "get_refund_status", "issue_refund", "delete_order"),
    fc.string({ maxLength: 100 }),
  ),
  input: fc.oneof(
    fc.constant({ order_id: "A-1001" }),
    fc.constant({ order_id: "A-1001", amount_cents: 500, reason: "broken" }),
    fc.jsonValue({ maxDepth: 3 }),
    fc.constant(undefined),
  ),
});
const count = fc.oneof(
  fc.nat(),
  fc.constantFrom(-1, Number.NaN, Number.POSITIVE_INFINITY, 1.5, 2 ** 60),
);
const answer = fc.record({
  text: fc.oneof(
    fc.string(),
    fc.constant('{"decision":"rejected","reason":"Your order is on its way."}'),
    fc.constant('{"decision":"approved","reason":"done","refund_id":"rf_1","amount_cents":1}'),
    fc.constant("y".repeat(400_000)),
  ),
  toolCalls: fc.oneof(
    fc.constant(undefined),
    fc.array(toolCall, { maxLength: 6 }),
    fc.array(toolCall, { minLength: 30, maxLength: 80 }),
  ),
  usage: fc.record({ inputTokens: count, outputTokens: count }),
  latencyMs: count,
});
type Answer = typeof answer extends fc.Arbitrary<infer A> ? A : never;

/** A model port that plays the answers in order, then the last again. */
function playing(answers: readonly Answer[]): ModelPort {
  let next = 0;
  return {
    name: "malformed",
    async converse(): Promise<ModelResponse> {
      const a = answers[Math.min(next++, answers.length - 1)] as Answer;
      return {
        text: a.text,
        ...(a.toolCalls ? { toolCalls: a.toolCalls } : {}),
        stopReason: a.toolCalls?.length ? "tool_use" : "end_turn",
        usage: a.usage,
        modelId: "malformed",
        latencyMs: a.latencyMs,
      };
    },
  };
}

describe("any model answer", () => {
  it("ends in committed steps: an answer, a wait for a person, or NEEDS_HUMAN; never a dead letter", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(answer, { minLength: 1, maxLength: 4 }), async (answers) => {
        const desk = refundDesk({ maxTurns: 6 }, playing(answers));
        const started = await desk.ask("A-1001", "Please refund my shoes");
        expect(started.status).toBe("applied");
        for (let i = 0; i < 40; i++) {
          const [step] = desk.nextSteps();
          if (!step) break;
          const result = await desk.t.deliver(step);
          desk.delivered.add(step.event_id);
          expect(result.status).toBe("applied");
        }
        expect(desk.nextSteps()).toEqual([]);
        const journal = await desk.journal();
        expect(["COMPLETED", "NEEDS_HUMAN", "BLOCKED"]).toContain(journal?.status);
        expect(desk.payments.calls).toBe(0);
      }),
      { numRuns: 60 },
    );
  }, 120_000);
});
