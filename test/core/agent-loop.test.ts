import { describe, expect, it } from "vitest";
import {
  type AgentDefinition,
  type AgentJournal,
  type AnyTool,
  agentModelSchemas,
  defineAgent,
  JOURNAL_WINDOW,
  journalContent,
  MAX_TURNS_LIMIT,
} from "../../functions/core/agent/agent";
import {
  contentRef,
  InMemoryContentStore,
  toolOutputsSeen,
} from "../../functions/core/agent/content";
import { type AgentPorts, agentStep, type StepResult } from "../../functions/core/agent/loop";
import {
  conversationRefs,
  conversationTexts,
  MESSAGES_KEPT,
  withMessage,
} from "../../functions/core/agent/messages";
import { approvalExpired, personDecides } from "../../functions/core/agent/person";
import {
  defineTool,
  type ToolCallContext,
  ToolRejectedError,
  ToolTimeoutError,
} from "../../functions/core/agent/tool";
import { PermanentError, TransientError } from "../../functions/core/errors";
import type {
  ModelMessage,
  ModelPort,
  ModelRequest,
  ModelResponse,
  ModelToolResult,
} from "../../functions/core/model";
import { jsonSchemasOf } from "../../functions/core/model-schema-export";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { stepDecision } from "../../lib/operator/agent-actions";
import * as z from "../../schemas/zod";
import { firstJournal } from "../support/agent-journal";

/**
 * The generic agent loop (functions/core/agent), driven step by step without the pipeline: a tiny
 * agent, a scripted model whose answers the test chooses and whose calls it counts, in-memory
 * content and side-effect stores. Each step's journal is committed as the run's item would be (a
 * JSON round trip) before the next step reads it.
 */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const RUN = "run_tiny_1";
const T0 = new Date("2025-03-01T09:00:00.000Z");
const GOOD_ANSWER = JSON.stringify({ verdict: "yes", note: "the order was checked" });

/** What the scripted model says on one turn: a text answer, or calls to tools. */
type Turn = { readonly text: string } | { readonly call: ReadonlyArray<[string, unknown]> };

/** A ModelPort whose answers the test scripts (by turn, 1-based) and whose calls it counts. */
class ScriptedModel implements ModelPort {
  readonly name = "scripted";
  calls = 0;
  /** The latest request (the conversation the model was shown). */
  last?: ModelRequest;

  constructor(private readonly script: (turn: number, request: ModelRequest) => Turn) {}

  async converse(request: ModelRequest): Promise<ModelResponse> {
    this.calls += 1;
    this.last = request;
    // The conversation starts with the user and alternates, as every model API requires.
    request.messages.forEach((m, i) => {
      if (m.role !== (i % 2 === 0 ? "user" : "assistant"))
        throw new Error(`message ${i} is from the ${m.role}: the conversation does not alternate`);
    });
    const turn = this.script(this.calls, request);
    const toolCalls =
      "call" in turn
        ? turn.call.map(([name, input], i) => ({ id: `call_${this.calls}_${i + 1}`, name, input }))
        : undefined;
    return {
      text: "text" in turn ? turn.text : "",
      ...(toolCalls ? { toolCalls } : {}),
      stopReason: toolCalls ? "tool_use" : "end_turn",
      usage: { inputTokens: 100, outputTokens: 10 },
      modelId: "scripted",
      latencyMs: 5,
    };
  }

  /** The latest message the model was shown. */
  lastMessage(): ModelMessage | undefined {
    return this.last?.messages.at(-1);
  }

  /** The tool results of the latest message the model was shown. */
  lastResults(): readonly ModelToolResult[] {
    return this.lastMessage()?.toolResults ?? [];
  }
}

const Verdict = z.object({
  verdict: z.enum(["yes", "no"]),
  note: z.string().check(z.minLength(1)),
});
type Verdict = z.output<typeof Verdict>;

/** A read tool: looks `n` up and gives ~3 KB back, or does what `behave` says. */
function lookupTool(behave?: (n: number, context: ToolCallContext) => Promise<void> | void) {
  return defineTool({
    name: "lookup",
    description: "Look a number up.",
    effect: "read",
    input: z.object({ n: z.int() }),
    output: z.object({ n: z.int(), blob: z.string() }),
    async run({ n }, context) {
      await behave?.(n, context);
      return { n, blob: `${n}:`.padEnd(3000, "x") };
    },
  });
}

/** A write tool without `query`: it pays under the call's key (the keys it saw, in order). */
function payTool(
  options: {
    behave?: (attempt: number) => void;
    approval?: { deadlineSeconds: number; onDeadline: "reject" | "fail" };
  } = {},
) {
  const keys: string[] = [];
  const tool = defineTool({
    name: "pay",
    description: "Pay an amount.",
    effect: "write",
    input: z.object({ cents: z.int().check(z.positive()) }),
    output: z.object({ receipt: z.string() }),
    ...(options.approval
      ? {
          approval: {
            required: ({ cents }: { cents: number }) => cents > 100,
            ...options.approval,
          },
        }
      : {}),
    async run({ cents }, { key }) {
      keys.push(key);
      options.behave?.(keys.length);
      return { receipt: `r-${cents}` };
    },
  });
  return { tool, keys };
}

function tinyAgent(
  tools: readonly AnyTool[],
  settings: Partial<Pick<AgentDefinition<Verdict>, "maxTurns" | "maxErrorTurns" | "accept">> = {},
): AgentDefinition<Verdict> {
  return defineAgent({
    name: "tiny",
    instructions: "Check the order, then answer with a verdict.",
    tools,
    output: Verdict,
    schemas: jsonSchemasOf(
      agentModelSchemas(Object.fromEntries(tools.map((t) => [t.name, t.input])), Verdict),
    ),
    maxTurns: 10,
    ...settings,
  });
}

function portsWith(model: ModelPort) {
  return { model, content: new InMemoryContentStore(), sideEffects: new InMemorySideEffects() };
}

function begin(ports: AgentPorts): Promise<AgentJournal> {
  return firstJournal(ports.content, {
    runId: RUN,
    taskId: TASK,
    agent: "tiny",
    stem: "tiny",
    subject: { order_id: "42" },
    text: "Check order 42.",
    now: T0,
    payload: { order_id: "42" },
  });
}

/** The journal as the run's item stores it. */
function commit(journal: AgentJournal): AgentJournal {
  return JSON.parse(JSON.stringify(journal)) as AgentJournal;
}

/** One delivered and committed step. */
async function step(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
  options: { now?: Date; receiveCount?: number } = {},
): Promise<StepResult> {
  const result = await agentStep(agent, journal, ports, {
    now: options.now ?? T0,
    receiveCount: options.receiveCount ?? 1,
  });
  return { ...result, journal: commit(result.journal) };
}

/** Steps until the run waits or ends (a runaway loop fails the test). */
async function drive(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
  now = T0,
): Promise<StepResult> {
  let current = journal;
  for (let i = 0; i < 1000; i++) {
    const result = await step(agent, current, ports, { now });
    if (result.next !== "continue") return result;
    current = result.journal;
  }
  throw new Error("the run did not stop within 1000 steps");
}

/** A payment tool whose bank never answers: each call's outcome is unknown. */
const unansweredPay = () =>
  payTool({
    behave: () => {
      throw new ToolTimeoutError("the bank did not answer");
    },
  });

/** A model that asks to pay `asks[n]` on turn n+1, each time as `call_1`, then answers. */
function sameIdModel(asks: ReadonlyArray<{ readonly cents: number }>): ModelPort {
  return {
    name: "same-ids",
    async converse(request) {
      const turn = request.messages.filter((m) => m.role === "assistant").length;
      const cents = asks[turn];
      return {
        text: cents ? "" : GOOD_ANSWER,
        ...(cents ? { toolCalls: [{ id: "call_1", name: "pay", input: cents }] } : {}),
        stopReason: cents ? "tool_use" : "end_turn",
        usage: { inputTokens: 10, outputTokens: 5 },
        modelId: "same-ids",
        latencyMs: 1,
      };
    },
  };
}

describe("the agent loop (functions/core/agent)", () => {
  it("a 100-turn run completes and its journal stays small: references and a window, not the text", async () => {
    const model = new ScriptedModel((turn) =>
      turn < 100 ? { call: [["lookup", { n: turn }]] } : { text: GOOD_ANSWER },
    );
    const ports = portsWith(model);
    const agent = tinyAgent([lookupTool()], { maxTurns: 100 });
    const { journal, next } = await drive(agent, await begin(ports), ports);
    expect(next).toBe("end");
    expect(journal.status).toBe("COMPLETED");
    expect(journal.output).toEqual(JSON.parse(GOOD_ANSWER));
    expect(model.calls).toBe(100);
    expect(journal.totals).toMatchObject({ model_turns: 100, tool_calls: 99, refused_calls: 0 });
    expect(journal.totals.input_tokens).toBe(100 * 100);
    // The model saw every result: the prompt, then a call and its results per turn.
    expect(model.last?.messages).toHaveLength(1 + 2 * 99);
    expect(model.lastResults()[0]?.content).toMatchObject({ n: 99 });
    // The conversation is ~300 KB; the item holds its references and the latest steps only.
    const stored = [...ports.content.texts.values()].reduce((sum, t) => sum + t.length, 0);
    expect(stored).toBeGreaterThan(99 * 3000);
    expect(Buffer.byteLength(JSON.stringify(journal), "utf8")).toBeLessThan(64 * 1024);
    expect(journal.window.length).toBeLessThanOrEqual(JOURNAL_WINDOW);
    expect(journal.window.at(-1)?.step).toBe(journal.step);
    expect(journal.step).toBe(100 + 99);
  });

  it("a 200-turn run's item is the same size at its last turn as at its tenth: older messages go to pages, and the model still sees them all", async () => {
    const model = new ScriptedModel((turn) =>
      turn < 200 ? { call: [["lookup", { n: turn }]] } : { text: GOOD_ANSWER },
    );
    const ports = portsWith(model);
    const agent = tinyAgent([lookupTool()], { maxTurns: 200 });
    // The item's size after each turn's tool call is answered (the turn's last step).
    const sizes = new Map<number, number>();
    let current = await begin(ports);
    let result: StepResult | undefined;
    for (let i = 0; i < 1000 && result?.next !== "end"; i++) {
      result = await step(agent, current, ports);
      current = result.journal;
      if (current.pending.length === 0)
        sizes.set(current.totals.model_turns, Buffer.byteLength(JSON.stringify(current), "utf8"));
    }
    expect(current.status).toBe("COMPLETED");
    expect(model.last?.messages).toHaveLength(1 + 2 * 199);
    expect(model.last?.messages.map((m) => m.toolResults?.[0]?.toolCallId ?? m.role)).toEqual([
      "user",
      ...Array.from({ length: 199 }, (_, i) => ["assistant", `call_${i + 1}_1`]).flat(),
    ]);
    expect(current.messages).toHaveLength(MESSAGES_KEPT);
    expect(current.earlier?.total).toBe(1 + 2 * 199 + 1);
    // Only the digits of step numbers, turns and call ids grow (turn 10 against turn 199); with
    // every reference kept in the item, it would hold 378 more of 64 characters.
    const [tenth, last] = [sizes.get(10) ?? 0, sizes.get(199) ?? 0];
    expect(tenth).toBeGreaterThan(0);
    expect(last - tenth).toBeGreaterThanOrEqual(0);
    expect(last - tenth).toBeLessThanOrEqual(tenth * 0.02);
    // An erasure finds every text of the conversation, pages included.
    const refs = await journalContent(current, ports.content);
    expect(refs).toHaveLength(current.earlier?.total ?? 0);
    expect(new Set(refs).size).toBe(refs.length);
    expect(await conversationTexts(current, ports.content)).toEqual(
      await ports.content.getMany(refs),
    );
  });

  it("a tool whose answer is too large to store fails the step at once, permanently, naming the tool", async () => {
    const huge = defineTool({
      name: "dump",
      description: "Dump everything.",
      effect: "read",
      input: z.object({}),
      output: z.object({ blob: z.string() }),
      async run() {
        return { blob: "x".repeat(400_000) };
      },
    });
    const model = new ScriptedModel(() => ({ call: [["dump", {}]] }));
    const ports = portsWith(model);
    const agent = tinyAgent([huge]);
    const { journal } = await step(agent, await begin(ports), ports);
    const error = await step(agent, journal, ports).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({
      code: "tool.output_too_large",
      details: { tool: "dump", agent: "tiny", run_id: RUN },
    });
    expect((error as Error).message).toMatch(
      /^tool dump of agent tiny \(run run_tiny_1\) answered/,
    );
  });

  it("a run stored before pages, with all its references in its item, seals them at its next message", async () => {
    const ports = portsWith(new ScriptedModel(() => ({ text: GOOD_ANSWER })));
    const refs = await Promise.all(
      Array.from({ length: 40 }, (_, i) => ports.content.put(JSON.stringify({ n: i }))),
    );
    const next = await withMessage({ messages: refs }, "new", ports.content);
    expect(next.messages).toEqual([...refs.slice(-(MESSAGES_KEPT - 1)), "new"]);
    expect(next.earlier).toMatchObject({ sealed: 41, total: 41 });
    expect(await conversationRefs(next, ports.content)).toEqual([...refs, "new"]);
    const after = await withMessage(next, "newer", ports.content);
    expect(after.earlier).toMatchObject({ sealed: 41, total: 42 });
    expect(await conversationRefs(after, ports.content)).toEqual([...refs, "new", "newer"]);
  });

  it("the step whose answer ends the run gives back the conversation's texts, as it read and wrote them", async () => {
    const model = new ScriptedModel((turn) =>
      turn < 3 ? { call: [["lookup", { n: turn }]] } : { text: GOOD_ANSWER },
    );
    const ports = portsWith(model);
    const { journal, next, conversation } = await drive(
      tinyAgent([lookupTool()]),
      await begin(ports),
      ports,
    );
    expect(next).toBe("end");
    // The stored texts of every message, the answer's last: what the role's finish is given.
    expect(conversation).toEqual(await ports.content.getMany(journal.messages));
    const outputs = toolOutputsSeen(conversation ?? []).map((o) => JSON.parse(o).n);
    expect(outputs).toEqual([1, 2]);
  });

  it("each model turn offers the tools and asks for the answer's shape, from the agent's schemas", async () => {
    const model = new ScriptedModel(() => ({ text: GOOD_ANSWER }));
    const ports = portsWith(model);
    const agent = tinyAgent([lookupTool()]);
    await drive(agent, await begin(ports), ports);
    expect(model.last?.tools).toStrictEqual([
      {
        name: "lookup",
        description: agent.tools[0]?.description,
        inputSchema: agent.schemas["tool:lookup"],
      },
    ]);
    expect(model.last?.output).toStrictEqual({ name: "answer", schema: agent.schemas.answer });
    expect(model.last?.output?.schema).toMatchObject({ required: ["verdict", "note"] });
  });

  it("the turn budget: a model that never answers is handed to a person after maxTurns turns", async () => {
    const model = new ScriptedModel((turn) => ({ call: [["lookup", { n: turn }]] }));
    const ports = portsWith(model);
    const agent = tinyAgent([lookupTool()], { maxTurns: 5 });
    const { journal, next } = await drive(agent, await begin(ports), ports);
    expect(next).toBe("wait");
    expect(journal.status).toBe("NEEDS_HUMAN");
    expect(journal.waiting).toMatchObject({ kind: "answer" });
    expect(journal.waiting?.reason).toMatch(/turn budget \(5\)/);
    expect(journal.failure?.code).toBe("agent.needs_human");
    expect(model.calls).toBe(5);
    expect(journal.totals).toMatchObject({ model_turns: 5, tool_calls: 5 });
    // Another delivery of a step never asks the model beyond the budget.
    await agentStep(agent, journal, ports, { now: T0, receiveCount: 2 }).catch(() => undefined);
    expect(model.calls).toBe(5);
  });

  describe("error turns are bounded", () => {
    it("an answer that is not JSON gets an error turn; maxErrorTurns of them in a row -> NEEDS_HUMAN", async () => {
      const model = new ScriptedModel(() => ({ text: "Sure, the order looks fine." }));
      const ports = portsWith(model);
      const agent = tinyAgent([lookupTool()], { maxErrorTurns: 3 });
      let journal = await begin(ports);
      const first = await step(agent, journal, ports);
      expect(first.next).toBe("continue");
      expect(first.journal.status).toBe("RUNNING");
      expect(first.journal.error_turns).toBe(1);
      journal = first.journal;
      const [told] = await ports.content.getMany(journal.messages.slice(-1));
      expect(JSON.parse(told ?? "{}")).toMatchObject({
        role: "user",
        text: expect.stringMatching(/^Your answer was not accepted: it is not JSON/),
      });
      const { journal: ended, next } = await drive(agent, journal, ports);
      expect(next).toBe("wait");
      expect(ended.status).toBe("NEEDS_HUMAN");
      expect(ended.waiting).toMatchObject({ kind: "answer" });
      expect(ended.waiting?.reason).toMatch(/^3 model turns in a row went wrong/);
      expect(ended.error_turns).toBe(3);
      expect(model.calls).toBe(3);
    });

    it("JSON that does not fit `output` gets an error turn that says what is wrong", async () => {
      const model = new ScriptedModel((turn) =>
        turn === 1 ? { text: JSON.stringify({ verdict: "maybe" }) } : { text: GOOD_ANSWER },
      );
      const ports = portsWith(model);
      const agent = tinyAgent([lookupTool()]);
      const { journal } = await drive(agent, await begin(ports), ports);
      expect(journal.status).toBe("COMPLETED");
      expect(model.calls).toBe(2);
      const told = model.lastMessage();
      expect(told?.role).toBe("user");
      expect(told?.text).toMatch(/^Your answer was not accepted: /);
      expect(told?.text).toMatch(/verdict: /);
      expect(told?.text).toMatch(/note: /);
      expect(journal.error_turns).toBe(0);
    });

    it("calls to an unknown tool count the same: maxErrorTurns of them in a row -> NEEDS_HUMAN", async () => {
      const model = new ScriptedModel(() => ({ call: [["look_up", { n: 1 }]] }));
      const ports = portsWith(model);
      const agent = tinyAgent([lookupTool()], { maxErrorTurns: 2 });
      const { journal } = await drive(agent, await begin(ports), ports);
      expect(journal.status).toBe("NEEDS_HUMAN");
      expect(journal.waiting?.reason).toBe("2 model turns in a row asked for tools wrongly");
      expect(journal.error_turns).toBe(2);
      expect(model.calls).toBe(2);
      expect(model.lastResults()[0]).toMatchObject({
        isError: true,
        content: { error: expect.stringMatching(/no tool named look_up; the tools are: lookup/) },
      });
      expect(journal.totals).toMatchObject({ refused_calls: 2, tool_calls: 0 });
    });

    it("a good turn in between resets the count", async () => {
      const bad = { text: "{not json" };
      const script: Turn[] = [
        bad,
        bad,
        { call: [["lookup", { n: 1 }]] },
        bad,
        bad,
        { text: GOOD_ANSWER },
      ];
      const model = new ScriptedModel((turn) => script[turn - 1] ?? bad);
      const ports = portsWith(model);
      const agent = tinyAgent([lookupTool()], { maxErrorTurns: 3 });
      let journal = await begin(ports);
      const seen: number[] = [];
      let result: StepResult;
      do {
        result = await step(agent, journal, ports);
        journal = result.journal;
        seen.push(journal.error_turns);
      } while (result.next === "continue");
      expect(journal.status).toBe("COMPLETED");
      expect(model.calls).toBe(6);
      // bad, bad, the call (its turn and its tool), bad, bad, the answer.
      expect(seen).toEqual([1, 2, 0, 0, 1, 2, 0]);
    });
  });

  it("`accept` refusing an answer gives an error turn with its text", async () => {
    const checked: Verdict[] = [];
    const model = new ScriptedModel((turn) =>
      turn === 1
        ? { text: JSON.stringify({ verdict: "yes", note: "fine" }) }
        : { text: GOOD_ANSWER },
    );
    const ports = portsWith(model);
    const agent = tinyAgent([lookupTool()], {
      async accept(answer, journal) {
        checked.push(answer);
        expect(journal.subject.order_id).toBe("42");
        return answer.note.includes("order") ? undefined : "the note must say what of the order";
      },
    });
    const { journal } = await drive(agent, await begin(ports), ports);
    expect(journal.status).toBe("COMPLETED");
    expect(model.calls).toBe(2);
    expect(model.lastMessage()).toMatchObject({
      role: "user",
      text: "Your answer was not accepted: the note must say what of the order",
    });
    expect(checked).toEqual([{ verdict: "yes", note: "fine" }, JSON.parse(GOOD_ANSWER)]);
  });

  describe("a read tool", () => {
    const callThenAnswer = () =>
      new ScriptedModel((turn) =>
        turn === 1 ? { call: [["lookup", { n: 7 }]] } : { text: GOOD_ANSWER },
      );

    it("a PermanentError from run goes back to the model as an error result, and the run goes on", async () => {
      for (const error of [
        new ToolRejectedError("lookup.refused", "7 is not listed"),
        new PermanentError("lookup.gone", "the directory is gone"),
      ]) {
        const model = callThenAnswer();
        const ports = portsWith(model);
        const agent = tinyAgent([
          lookupTool(() => {
            throw error;
          }),
        ]);
        const { journal } = await drive(agent, await begin(ports), ports);
        expect(journal.status, error.code).toBe("COMPLETED");
        expect(model.calls, error.code).toBe(2);
        expect(model.lastResults(), error.code).toEqual([
          {
            toolCallId: "call_1_1",
            content: { error: error.code, message: error.message },
            isError: true,
          },
        ]);
        expect(journal.totals.tool_calls, error.code).toBe(1);
        expect(journal.window.find((s) => s.kind === "tool")?.outcome, error.code).toBe(
          `failed: ${error.code}`,
        );
      }
    });

    it("a TransientError is rethrown and nothing is recorded; the next delivery runs it again", async () => {
      const model = callThenAnswer();
      const ports = portsWith(model);
      let runs = 0;
      const throttled = new TransientError("lookup.throttled", "slow down");
      const agent = tinyAgent([
        lookupTool(() => {
          runs += 1;
          if (runs === 1) throw throttled;
        }),
      ]);
      const asked = (await step(agent, await begin(ports), ports)).journal;
      const before = JSON.stringify(asked);
      const writes = ports.content.writes;
      await expect(step(agent, asked, ports)).rejects.toBe(throttled);
      expect(JSON.stringify(asked)).toBe(before);
      expect(ports.content.writes).toBe(writes);
      const ran = await step(agent, asked, ports, { receiveCount: 2 });
      expect(ran.recorded).toMatchObject({
        kind: "tool",
        tool: "lookup",
        outcome: "succeeded (run)",
      });
      expect(ran.journal.step).toBe(asked.step + 1);
      expect(runs).toBe(2);
    });

    it("a ToolTimeoutError becomes a TransientError: a read is simply run again, no key recorded", async () => {
      const model = callThenAnswer();
      const ports = portsWith(model);
      let runs = 0;
      const agent = tinyAgent([
        lookupTool(() => {
          runs += 1;
          if (runs === 1) throw new ToolTimeoutError("the directory did not answer");
        }),
      ]);
      const asked = (await step(agent, await begin(ports), ports)).journal;
      const timedOut = step(agent, asked, ports);
      await expect(timedOut).rejects.toBeInstanceOf(TransientError);
      await expect(timedOut).rejects.toMatchObject({
        code: "tool.read_retry",
        errorClass: "transient",
        message: expect.stringMatching(/lookup: the directory did not answer/),
      });
      const { journal } = await drive(agent, asked, ports);
      expect(journal.status).toBe("COMPLETED");
      expect(runs).toBe(2);
      expect(model.lastResults()[0]?.content).toMatchObject({ n: 7 });
      expect(ports.sideEffects.records.size).toBe(0);
    });
  });

  it("a tool call's step names the stored turn that asked for it and the answer the model was given; the window keeps neither", async () => {
    const model = new ScriptedModel((turn) =>
      turn === 1
        ? {
            call: [
              ["lookup", { n: 7 }],
              ["lookup", { n: 8 }],
            ],
          }
        : { text: GOOD_ANSWER },
    );
    const ports = portsWith(model);
    const agent = tinyAgent([lookupTool()]);
    const asked = (await step(agent, await begin(ports), ports)).journal;
    const first = await step(agent, asked, ports);
    const second = await step(agent, first.journal, ports);
    const turnRef = first.recorded.turn_ref ?? "";
    expect(second.recorded.turn_ref).toBe(turnRef);
    const [turn] = await ports.content.getMany([turnRef]);
    expect(JSON.parse(turn ?? "null").toolCalls).toEqual([
      { id: "call_1_1", name: "lookup", input: { n: 7 } },
      { id: "call_1_2", name: "lookup", input: { n: 8 } },
    ]);
    expect([first.recorded.tool_call_id, second.recorded.tool_call_id]).toEqual([
      "call_1_1",
      "call_1_2",
    ]);
    expect(second.journal.window.filter((s) => "turn_ref" in s)).toEqual([]);
    // Each call's answer, stored, is what the model is given on its next turn.
    const answers = await ports.content.getMany(
      [first, second].map((s) => s.recorded.result_ref ?? ""),
    );
    await step(agent, second.journal, ports);
    expect(model.lastResults().map((r) => r.content)).toEqual(
      answers.map((text) => JSON.parse(text)),
    );
    expect(model.lastResults()[1]?.content).toMatchObject({ n: 8 });
    expect(second.journal.window.filter((s) => "result_ref" in s)).toEqual([]);
  });

  it("a write tool without `query`: a timeout is followed by a run again under the same key, never a new one", async () => {
    const model = new ScriptedModel((turn) =>
      turn === 1 ? { call: [["pay", { cents: 50 }]] } : { text: GOOD_ANSWER },
    );
    const ports = portsWith(model);
    const pay = payTool({
      behave: (attempt) => {
        if (attempt === 1) throw new ToolTimeoutError("the bank did not answer");
      },
    });
    const agent = tinyAgent([pay.tool]);
    const asked = (await step(agent, await begin(ports), ports)).journal;
    const key = `${TASK}:${RUN}:1:call_1_1`;
    await expect(step(agent, asked, ports, { receiveCount: 1 })).rejects.toMatchObject({
      code: "tool.outcome_unknown",
      errorClass: "transient",
    });
    expect(await ports.sideEffects.get(key)).toMatchObject({ state: "unknown", attempts: 1 });
    // The queue hands the same step out again.
    const again = await step(agent, asked, ports, { receiveCount: 2 });
    expect(pay.keys).toEqual([key, key]);
    expect(again.recorded).toMatchObject({
      kind: "tool",
      tool: "pay",
      key,
      outcome: "succeeded (retry)",
    });
    expect(await ports.sideEffects.get(key)).toMatchObject({ state: "succeeded", attempts: 2 });
    expect([...ports.sideEffects.records.keys()]).toEqual([key]);
    const { journal } = await drive(agent, again.journal, ports);
    expect(journal.status).toBe("COMPLETED");
    expect(model.lastResults()[0]?.content).toEqual({ receipt: "r-50" });
    expect(pay.keys).toEqual([key, key]);
  });

  it("a model that gives two turns' calls the same id: each write runs once under its own turn's key", async () => {
    const ports = portsWith(sameIdModel([{ cents: 50 }, { cents: 70 }]));
    const pay = payTool();
    const { journal, conversation } = await drive(tinyAgent([pay.tool]), await begin(ports), ports);
    expect(journal.status).toBe("COMPLETED");
    expect(pay.keys).toEqual([`${TASK}:${RUN}:1:call_1`, `${TASK}:${RUN}:2:call_1`]);
    const results = (conversation ?? []).flatMap(
      (text) => (JSON.parse(text) as ModelMessage).toolResults ?? [],
    );
    expect(results.map((r) => r.content)).toEqual([{ receipt: "r-50" }, { receipt: "r-70" }]);
  });

  describe("a person's decision belongs to one turn's call, when a model gives two turns' calls the same id", () => {
    /** Steps until the run waits or ends, redelivering a step whose write's outcome is unknown. */
    async function driveThroughUnknown(
      agent: AgentDefinition,
      journal: AgentJournal,
      ports: AgentPorts,
      now = T0,
    ): Promise<StepResult> {
      let current = journal;
      let receiveCount = 1;
      for (let i = 0; i < 100; i++) {
        const result = await step(agent, current, ports, { receiveCount, now }).catch(
          (error: unknown) => {
            if ((error as TransientError).code !== "tool.outcome_unknown") throw error;
            return undefined;
          },
        );
        if (!result) {
          receiveCount += 1;
          continue;
        }
        if (result.next !== "continue") return result;
        current = result.journal;
        receiveCount = 1;
      }
      throw new Error("the run did not stop within 100 steps");
    }

    it("an approval given on turn 1 is no approval of turn 2's call: that one is approved or rejected on its own", async () => {
      const ports = portsWith(sameIdModel([{ cents: 500 }, { cents: 900 }, { cents: 700 }]));
      const pay = payTool({ approval: { deadlineSeconds: 3600, onDeadline: "reject" } });
      const agent = tinyAgent([pay.tool]);
      const decide = (journal: AgentJournal, decision: "approve" | "reject", by = "ops") =>
        personDecides(agent, journal, { tool_call_id: "call_1", decision, by }, ports, T0);
      const first = await drive(agent, await begin(ports), ports);
      const approved = await decide(first.journal, "approve");
      if (!approved) throw new Error("the first approval changed nothing");
      const second = await drive(agent, commit(approved.journal), ports);
      expect(pay.keys).toEqual([`${TASK}:${RUN}:1:call_1`]);
      expect(second.journal.status).toBe("BLOCKED");
      expect(second.journal.waiting).toMatchObject({
        tool_call_id: "call_1",
        input: { cents: 900 },
      });
      // Turn 1's decision is not turn 2's: a person may reject the 900, or approve it, and the
      // operator's commands send either.
      for (const decision of ["approve", "reject"] as const)
        expect(
          stepDecision(second.journal, RUN, "call_1", decision, { requestedBy: "lead" }),
        ).toHaveProperty("command");
      const rejected = await decide(second.journal, "reject", "lead");
      expect(rejected?.journal.status).toBe("RUNNING");
      const secondApproved = await decide(second.journal, "approve", "lead");
      if (!secondApproved) throw new Error("the second approval changed nothing");
      expect(secondApproved.journal.status).toBe("RUNNING");
      // Decided, turn 2's call takes a repeat as a repeat and the other decision as a refusal.
      expect(await decide(secondApproved.journal, "approve")).toBeUndefined();
      await expect(decide(secondApproved.journal, "reject")).rejects.toThrow(
        /call_1 was already decided: approve by lead/,
      );
      const third = await drive(agent, commit(secondApproved.journal), ports);
      expect(pay.keys).toEqual([`${TASK}:${RUN}:1:call_1`, `${TASK}:${RUN}:2:call_1`]);
      expect(third.journal.waiting).toMatchObject({ input: { cents: 700 } });
      const rejectedThird = await decide(third.journal, "reject");
      if (!rejectedThird) throw new Error("the third rejection changed nothing");
      const { journal } = await drive(agent, commit(rejectedThird.journal), ports);
      expect(journal.status).toBe("COMPLETED");
      expect(pay.keys).toHaveLength(2);
      expect(journal.decisions?.map(({ turn, decision, by }) => ({ turn, decision, by }))).toEqual([
        { turn: 1, decision: "approve", by: "ops" },
        { turn: 2, decision: "approve", by: "lead" },
        { turn: 3, decision: "reject", by: "ops" },
      ]);
      // Once the calls ran, the same decision again changes nothing and the other is refused.
      expect(await decide(journal, "reject")).toBeUndefined();
      await expect(decide(journal, "approve")).rejects.toThrow(/already decided: reject by ops/);
    });

    it("an unknown outcome resolved on turn 1 does not resolve turn 2's: that one is resolved on its own", async () => {
      const ports = portsWith(sameIdModel([{ cents: 50 }, { cents: 70 }]));
      const pay = unansweredPay();
      const agent = tinyAgent([pay.tool]);
      const resolve = (journal: AgentJournal, decision: "applied" | "not_applied") =>
        personDecides(
          agent,
          journal,
          {
            tool_call_id: "call_1",
            decision,
            by: "ops",
            ...(decision === "applied" ? { output: { receipt: "r-70" } } : {}),
          },
          ports,
          T0,
        );
      const first = await driveThroughUnknown(agent, await begin(ports), ports);
      expect(first.journal.waiting).toMatchObject({ kind: "outcome", input: { cents: 50 } });
      const notApplied = await resolve(first.journal, "not_applied");
      if (!notApplied) throw new Error("the first resolution changed nothing");
      const second = await driveThroughUnknown(agent, commit(notApplied.journal), ports);
      expect(second.journal.status).toBe("NEEDS_HUMAN");
      expect(second.journal.waiting).toMatchObject({
        kind: "outcome",
        tool_call_id: "call_1",
        key: `${TASK}:${RUN}:2:call_1`,
      });
      const applied = await resolve(second.journal, "applied");
      if (!applied) throw new Error("the second resolution changed nothing");
      expect(applied.wrote).toMatchObject({ key: `${TASK}:${RUN}:2:call_1` });
      expect(await ports.sideEffects.get(`${TASK}:${RUN}:2:call_1`)).toMatchObject({
        state: "succeeded",
      });
      expect(await ports.sideEffects.get(`${TASK}:${RUN}:1:call_1`)).toMatchObject({
        state: "failed",
      });
      const { journal } = await drive(agent, commit(applied.journal), ports);
      expect(journal.status).toBe("COMPLETED");
      expect(journal.decisions?.map(({ turn, decision }) => ({ turn, decision }))).toEqual([
        { turn: 1, decision: "not_applied" },
        { turn: 2, decision: "applied" },
      ]);
    });

    it("a decision kept before decisions kept their turn still answers the call without a turn it was taken on, and no later turn's", async () => {
      const ports = portsWith(sameIdModel([{ cents: 500 }, { cents: 900 }]));
      const pay = payTool({ approval: { deadlineSeconds: 3600, onDeadline: "reject" } });
      const agent = tinyAgent([pay.tool]);
      const decide = (journal: AgentJournal, decision: "approve" | "reject") =>
        personDecides(agent, journal, { tool_call_id: "call_1", decision, by: "ops" }, ports, T0);
      const keptBefore = (journal: AgentJournal) =>
        ({
          ...journal,
          decisions: journal.decisions?.map(({ turn: _turn, ...decided }) => decided),
        }) as AgentJournal;
      // A call without a turn, approved when decisions kept none: the same approval again is a
      // repeat, a rejection is refused.
      const first = await drive(agent, await begin(ports), ports);
      const approved = await decide(first.journal, "approve");
      if (!approved) throw new Error("the first approval changed nothing");
      const legacy = keptBefore({
        ...approved.journal,
        pending: approved.journal.pending.map(({ turn: _turn, decision: _d, ...call }) => call),
      } as AgentJournal);
      expect(legacy.decisions).toEqual([
        { tool_call_id: "call_1", decision: "approve", by: "ops", at: T0.toISOString() },
      ]);
      expect(await decide(legacy, "approve")).toBeUndefined();
      await expect(decide(legacy, "reject")).rejects.toThrow(/already decided: approve by ops/);
      // Turn 1's approval, kept without its turn, is no approval of turn 2's call.
      const second = await drive(agent, commit(approved.journal), ports);
      expect(second.journal.waiting).toMatchObject({ input: { cents: 900 } });
      const rejected = await decide(keptBefore(second.journal), "reject");
      expect(rejected?.journal.status).toBe("RUNNING");
    });

    it("an approval given to turn 1's call, arriving when turn 2's call of that id waits, is refused: it names the wait it was given to", async () => {
      const ports = portsWith(sameIdModel([{ cents: 500 }, { cents: 900 }]));
      const pay = payTool({ approval: { deadlineSeconds: 3600, onDeadline: "reject" } });
      const agent = tinyAgent([pay.tool]);
      const T1 = new Date(T0.getTime() + 60_000);
      const [since0, since1] = [T0.toISOString(), T1.toISOString()];
      const decide = (
        journal: AgentJournal,
        decision: "approve" | "reject",
        by: string,
        waitingSince?: string,
      ) =>
        personDecides(
          agent,
          journal,
          {
            tool_call_id: "call_1",
            decision,
            by,
            ...(waitingSince === undefined ? {} : { waiting_since: waitingSince }),
          },
          ports,
          T1,
        );
      const first = await drive(agent, await begin(ports), ports);
      expect(first.journal.waiting).toMatchObject({ input: { cents: 500 }, since: since0 });
      // Anna approves the 500 as she was shown it: her command names that wait.
      expect(
        stepDecision(first.journal, RUN, "call_1", "approve", { requestedBy: "anna" }),
      ).toMatchObject({
        command: {
          payload: { tool_call_id: "call_1", decision: "approve", waiting_since: since0 },
        },
      });
      // Before it arrives, Ben rejects the 500, and the model asks for 900 as call_1 again.
      const rejected = await decide(first.journal, "reject", "ben", since0);
      if (!rejected) throw new Error("the rejection changed nothing");
      const second = await drive(agent, commit(rejected.journal), ports, T1);
      expect(second.journal.waiting).toMatchObject({
        tool_call_id: "call_1",
        input: { cents: 900 },
        since: since1,
      });
      // Anna's approval was given to the 500's wait: it is no approval of the 900.
      await expect(decide(second.journal, "approve", "anna", since0)).rejects.toThrow(
        `the decision was given to what call_1 waited for since ${since0}; it now waits for an approval of pay call_1 since ${since1}`,
      );
      expect(
        stepDecision(second.journal, RUN, "call_1", "approve", {
          requestedBy: "anna",
          waitingSince: since0,
        }),
      ).toEqual({
        refused: `run ${RUN} no longer waits for what was answered (call_1 waiting since ${since0}): it now waits on call_1 since ${since1} (see agentbus approvals)`,
      });
      // A decision given to the 900's wait decides it, and so does one naming no wait.
      expect(await decide(second.journal, "reject", "ben")).toMatchObject({
        journal: { status: "RUNNING" },
      });
      const approved = await decide(second.journal, "approve", "ben", since1);
      if (!approved) throw new Error("the approval changed nothing");
      const { journal } = await drive(agent, commit(approved.journal), ports, T1);
      expect(journal.status).toBe("COMPLETED");
      expect(pay.keys).toEqual([`${TASK}:${RUN}:2:call_1`]);
    });

    it("an outcome given to turn 1's call, arriving when turn 2's call of that id waits for one, is refused", async () => {
      const ports = portsWith(sameIdModel([{ cents: 50 }, { cents: 70 }]));
      const pay = unansweredPay();
      const agent = tinyAgent([pay.tool]);
      const T1 = new Date(T0.getTime() + 60_000);
      const [since0, since1] = [T0.toISOString(), T1.toISOString()];
      const resolve = (
        journal: AgentJournal,
        decision: "applied" | "not_applied",
        waitingSince: string,
      ) =>
        personDecides(
          agent,
          journal,
          {
            tool_call_id: "call_1",
            decision,
            by: "ops",
            waiting_since: waitingSince,
            ...(decision === "applied" ? { output: { receipt: "r-50" } } : {}),
          },
          ports,
          T1,
        );
      const first = await driveThroughUnknown(agent, await begin(ports), ports);
      expect(first.journal.waiting).toMatchObject({ kind: "outcome", since: since0 });
      const notApplied = await resolve(first.journal, "not_applied", since0);
      if (!notApplied) throw new Error("the first resolution changed nothing");
      const second = await driveThroughUnknown(agent, commit(notApplied.journal), ports, T1);
      expect(second.journal.waiting).toMatchObject({
        kind: "outcome",
        key: `${TASK}:${RUN}:2:call_1`,
        since: since1,
      });
      // The 50's receipt, given to turn 1's wait, does not close the 70's record.
      await expect(resolve(second.journal, "applied", since0)).rejects.toThrow(
        `it now waits for an outcome of pay call_1 since ${since1}`,
      );
      expect(
        stepDecision(second.journal, RUN, "call_1", "applied", {
          requestedBy: "ops",
          output: { receipt: "r-50" },
          waitingSince: since0,
        }),
      ).toMatchObject({
        refused: expect.stringContaining("no longer waits for what was answered"),
      });
      expect(await ports.sideEffects.get(`${TASK}:${RUN}:2:call_1`)).toMatchObject({
        state: "unknown",
      });
      const resolved = await resolve(second.journal, "not_applied", since1);
      expect(resolved?.journal.status).toBe("RUNNING");
    });
  });

  it("a call taken before calls kept their turn settles under the key it was claimed under", async () => {
    const model = new ScriptedModel((turn) =>
      turn === 1 ? { call: [["pay", { cents: 50 }]] } : { text: GOOD_ANSWER },
    );
    const ports = portsWith(model);
    const pay = payTool();
    const agent = tinyAgent([pay.tool]);
    const asked = (await step(agent, await begin(ports), ports)).journal;
    const before = {
      ...asked,
      pending: asked.pending.map(({ turn: _turn, ...call }) => call),
    } as AgentJournal;
    const settled = await step(agent, before, ports);
    expect(pay.keys).toEqual([`${TASK}:${RUN}:call_1_1`]);
    expect(settled.recorded).toMatchObject({ kind: "tool", key: `${TASK}:${RUN}:call_1_1` });
  });

  describe("approval", () => {
    const HOUR = 3600;
    const payThenAnswer = () =>
      new ScriptedModel((turn) =>
        turn === 1 ? { call: [["pay", { cents: 500 }]] } : { text: GOOD_ANSWER },
      );

    /** A run asked to pay above the threshold: BLOCKED on the call at `at`. */
    async function blockedRun(onDeadline: "reject" | "fail") {
      const model = payThenAnswer();
      const ports = portsWith(model);
      const pay = payTool({ approval: { deadlineSeconds: HOUR, onDeadline } });
      const agent = tinyAgent([pay.tool]);
      const asked = (await step(agent, await begin(ports), ports)).journal;
      const at = new Date(T0.getTime() + 60_000);
      const blocked = await step(agent, asked, ports, { now: at });
      const deadline = new Date(at.getTime() + HOUR * 1000);
      return { model, ports, pay, agent, blocked, deadline };
    }

    it("a call that needs approval blocks the run until its deadline", async () => {
      const { blocked, deadline, pay, agent, ports } = await blockedRun("reject");
      expect(blocked.next).toBe("wait");
      expect(blocked.journal.status).toBe("BLOCKED");
      expect(blocked.journal.waiting).toEqual({
        kind: "approval",
        tool_call_id: "call_1_1",
        tool: "pay",
        input: { cents: 500 },
        since: new Date(T0.getTime() + 60_000).toISOString(),
        deadline: deadline.toISOString(),
        reason: "pay needs a person's approval",
      });
      expect(pay.keys).toEqual([]);
      expect(approvalExpired(agent, blocked.journal, new Date(deadline.getTime() - 1))).toBe(
        undefined,
      );
      // A person approves in time: the call runs on the next step.
      const approved = await personDecides(
        agent,
        blocked.journal,
        { tool_call_id: "call_1_1", decision: "approve", by: "ops@example.com" },
        ports,
        deadline,
      );
      if (!approved) throw new Error("the approval changed nothing");
      expect(approved.journal.status).toBe("RUNNING");
      expect(approved.journal.waiting).toBeUndefined();
      expect(approvalExpired(agent, approved.journal, deadline)).toBe(undefined);
      // The same decision again (a second person, a command sent twice) changes nothing; the
      // other decision is refused, naming the one taken.
      const again = { tool_call_id: "call_1_1", by: "other@example.com" } as const;
      expect(
        await personDecides(agent, approved.journal, { ...again, decision: "approve" }, ports, T0),
      ).toBeUndefined();
      await expect(
        personDecides(agent, approved.journal, { ...again, decision: "reject" }, ports, T0),
      ).rejects.toThrow(/call_1_1 was already decided: approve by ops@example.com/);
      const { journal, conversation } = await drive(agent, commit(approved.journal), ports);
      expect(journal.status).toBe("COMPLETED");
      expect(pay.keys).toEqual([`${TASK}:${RUN}:1:call_1_1`]);
      // Resumed, the answering step read the turns before the wait from the store as well.
      expect(conversation).toEqual(await ports.content.getMany(journal.messages));
      expect(toolOutputsSeen(conversation ?? [])).toEqual([JSON.stringify({ receipt: "r-500" })]);
    });

    it("refuses a decision on another call, or of the wrong kind", async () => {
      const { blocked, agent, ports } = await blockedRun("reject");
      const decide = (tool_call_id: string, decision: "approve" | "applied") =>
        personDecides(agent, blocked.journal, { tool_call_id, decision, by: "ops" }, ports, T0);
      await expect(decide("call_9_9", "approve")).rejects.toMatchObject({
        code: "agent.decision_refused",
        message: expect.stringMatching(/waits for a decision on call_1_1, not call_9_9/),
      });
      await expect(decide("call_1_1", "applied")).rejects.toThrow(
        /waits for an approval: approve or reject, not applied/,
      );
    });

    it('onDeadline "reject": the deadline rejects the call, the model is told, and the run goes on', async () => {
      const { blocked, deadline, pay, agent, ports, model } = await blockedRun("reject");
      const expired = approvalExpired(agent, blocked.journal, deadline);
      expect(expired?.next).toBe("continue");
      expect(expired?.journal.status).toBe("RUNNING");
      expect(expired?.journal.waiting).toBeUndefined();
      expect(expired?.journal.pending[0]?.decision).toMatchObject({
        decision: "reject",
        by: "deadline",
      });
      expect(expired?.recorded).toMatchObject({ kind: "person", outcome: "reject by deadline" });
      const settled = await step(agent, commit(expired?.journal as AgentJournal), ports, {
        now: deadline,
      });
      expect(settled.recorded).toMatchObject({
        kind: "tool",
        tool: "pay",
        outcome: "failed: tool.rejected_by_person",
      });
      const { journal } = await drive(agent, settled.journal, ports, deadline);
      expect(journal.status).toBe("COMPLETED");
      expect(model.lastResults()).toEqual([
        {
          toolCallId: "call_1_1",
          content: {
            error: "tool.rejected_by_person",
            message: `reject by deadline: no decision by ${deadline.toISOString()}`,
          },
          isError: true,
        },
      ]);
      expect(pay.keys).toEqual([]);
      expect(ports.sideEffects.records.size).toBe(0);
    });

    it('onDeadline "fail": the deadline fails the run with agent.approval_expired', async () => {
      const { blocked, deadline, pay, agent, model } = await blockedRun("fail");
      expect(approvalExpired(agent, blocked.journal, new Date(deadline.getTime() - 1))).toBe(
        undefined,
      );
      const expired = approvalExpired(agent, blocked.journal, new Date(deadline.getTime() + 1));
      expect(expired?.next).toBe("end");
      expect(expired?.journal.status).toBe("FAILED");
      expect(expired?.journal.failure).toEqual({
        code: "agent.approval_expired",
        message: `no decision on pay by ${deadline.toISOString()}`,
      });
      expect(pay.keys).toEqual([]);
      expect(model.calls).toBe(1);
      // No step read the conversation: the role reads it for its finish (agent-role.ts).
      expect(expired).not.toHaveProperty("conversation");
    });
  });

  describe("definitions are checked", () => {
    const base = {
      description: "d",
      effect: "read" as const,
      input: z.object({}),
      output: z.object({}),
      run: async () => ({}),
    };

    it("defineTool refuses a name model APIs refuse, and a deadline that cannot pass", () => {
      for (const name of ["get order", "1st", "", "a".repeat(65), "ask?"])
        expect(() => defineTool({ ...base, name }), name).toThrow(
          expect.objectContaining({
            code: "tool.invalid_definition",
            message: expect.stringMatching(/^tool name .* must match/),
          }),
        );
      for (const deadlineSeconds of [0, -5, 1.5, Number.NaN])
        expect(() =>
          defineTool({
            ...base,
            name: "pay",
            approval: { required: () => true, deadlineSeconds, onDeadline: "reject" },
          }),
        ).toThrow(
          `tool pay: approval.deadlineSeconds must be a positive integer, got ${deadlineSeconds}`,
        );
      const fine = { ...base, name: "get_order-2" };
      expect(defineTool(fine)).toBe(fine);
    });

    it("defineAgent refuses two tools of one name, and a turn budget out of range", () => {
      expect(() => tinyAgent([lookupTool(), payTool().tool, lookupTool()])).toThrow(
        expect.objectContaining({
          code: "agent.invalid_definition",
          message: "agent tiny: two tools are named lookup",
        }),
      );
      for (const maxTurns of [0, -1, 2.5, MAX_TURNS_LIMIT + 1, Number.NaN])
        expect(() => tinyAgent([lookupTool()], { maxTurns }), String(maxTurns)).toThrow(
          `agent tiny: maxTurns must be an integer from 1 to ${MAX_TURNS_LIMIT}, got ${maxTurns}`,
        );
      expect(tinyAgent([lookupTool()], { maxTurns: 1 }).maxTurns).toBe(1);
      expect(tinyAgent([lookupTool()], { maxTurns: MAX_TURNS_LIMIT }).maxTurns).toBe(
        MAX_TURNS_LIMIT,
      );
    });
  });

  describe("InMemoryContentStore", () => {
    it("stores a text once under its hash", async () => {
      const store = new InMemoryContentStore();
      const a = await store.put("the same text");
      const b = await store.put("the same text");
      const other = await store.put("another text");
      expect(a).toBe(b);
      expect(a).toBe(contentRef("the same text"));
      expect(a).toMatch(/^[0-9a-f]{64}$/);
      expect(other).not.toBe(a);
      expect(store.texts.size).toBe(2);
      expect(await store.getMany([other, a, a])).toEqual([
        "another text",
        "the same text",
        "the same text",
      ]);
    });

    it("getMany of an unknown reference throws content.missing", async () => {
      const store = new InMemoryContentStore();
      const known = await store.put("known");
      const unknown = contentRef("never stored");
      await expect(store.getMany([known, unknown])).rejects.toMatchObject({
        code: "content.missing",
        errorClass: "permanent",
        details: { ref: unknown },
      });
    });
  });
});
