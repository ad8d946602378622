import { afterEach, describe, expect, it } from "vitest";
import {
  type AgentDefinition,
  type AgentJournal,
  type AnyTool,
  defineAgent,
} from "../../functions/core/agent/agent";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import { type AgentPorts, agentStep, type StepResult } from "../../functions/core/agent/loop";
import { conversationTexts } from "../../functions/core/agent/messages";
import { taskPollDue } from "../../functions/core/agent/task-wait";
import { PermanentError, TransientError } from "../../functions/core/errors";
import type {
  ModelPort,
  ModelRequest,
  ModelResponse,
  ModelToolSpec,
} from "../../functions/core/model";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import type { StepContext } from "../../functions/core/step-role";
import {
  type A2aToolDeclaration,
  a2aCardHash,
  a2aStep,
  a2aTool,
  InMemoryA2aAgent,
} from "../../functions/integrations/a2a/index";
import { SdkA2aAgent } from "../../functions/integrations/a2a/sdk-agent";
import { IDEMPOTENCY_KEY_META } from "../../functions/integrations/mcp/port";
import * as z from "../../schemas/zod";
import { A2A_TOKEN, startTestA2aAgent, type TestA2aAgent } from "../support/a2a-agent";
import { firstJournal } from "../support/agent-journal";

/**
 * Another system's A2A agent as an agent's tool and as a workflow step
 * (functions/integrations/a2a), through the official SDK's client against the SDK's own server on
 * 127.0.0.1 (test/support/a2a-agent.ts), which counts the messages it receives. As in the MCP
 * tools' test, the agent loop is driven step by step, a step's journal is committed (a JSON round
 * trip) before the next reads it, and a crash is a step whose journal is never committed.
 */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const RUN = "run_billing_1";
const T0 = new Date("2026-03-01T09:00:00.000Z");
/** The key of the first turn's call `call_1` (`<task>:<run>:<turn>:<call>`). */
const KEY_OF_CALL_1 = `${TASK}:${RUN}:1:call_1`;

type Turn = { readonly text: string } | { readonly call: readonly [string, unknown] };

/** A model that asks what the test scripts, turn by turn, and keeps what it was shown. */
class ScriptedModel implements ModelPort {
  readonly name = "scripted";
  readonly requests: ModelRequest[] = [];
  constructor(private readonly turns: readonly Turn[]) {}

  async converse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const turn = this.turns[this.requests.length - 1] ?? { text: "{}" };
    const call = "call" in turn ? [{ id: "call_1", name: turn.call[0], input: turn.call[1] }] : [];
    return {
      text: "text" in turn ? turn.text : "",
      ...(call.length ? { toolCalls: call } : {}),
      stopReason: call.length ? "tool_use" : "end_turn",
      usage: { inputTokens: 10, outputTokens: 5 },
      modelId: "scripted",
      latencyMs: 1,
    };
  }

  tool(name: string): ModelToolSpec | undefined {
    return this.requests[0]?.tools?.find((t) => t.name === name);
  }
}

const BILLING: A2aToolDeclaration = {
  name: "open_invoice",
  agent: "billing",
  skill: "open_invoice",
  timeoutMs: 5_000,
};

function billingAgent(tools: AnyTool[], maxUnknownAttempts = 3): AgentDefinition {
  return defineAgent({
    name: "billing-clerk",
    instructions: "Open an invoice for the customer.",
    tools,
    output: z.object({ invoice: z.string() }),
    schemas: {
      answer: {
        type: "object",
        properties: { invoice: { type: "string" } },
        required: ["invoice"],
      },
    },
    maxTurns: 5,
    maxUnknownAttempts,
  });
}

function begin(ports: AgentPorts): Promise<AgentJournal> {
  return firstJournal(ports.content, {
    runId: RUN,
    taskId: TASK,
    agent: "billing-clerk",
    stem: "billing",
    subject: { customer_id: "c-7" },
    text: "Invoice c-7.",
    now: T0,
  });
}

const commit = (journal: AgentJournal) => JSON.parse(JSON.stringify(journal)) as AgentJournal;

let agent: TestA2aAgent | undefined;
afterEach(async () => {
  await agent?.close();
  agent = undefined;
});

async function clerk(
  turns: readonly Turn[],
  options: { declaration?: Partial<A2aToolDeclaration>; dedupes?: boolean } = {},
) {
  agent = await startTestA2aAgent({ dedupes: options.dedupes });
  const port = new SdkA2aAgent({ url: agent.cardUrl, token: async () => A2A_TOKEN });
  const model = new ScriptedModel(turns);
  const ports = {
    model,
    content: new InMemoryContentStore(),
    sideEffects: new InMemorySideEffects(),
  };
  const tool = () => a2aTool(port, { ...BILLING, ...options.declaration });
  const definition = billingAgent([tool()]);
  const step = (journal: AgentJournal, receiveCount = 1, def = definition): Promise<StepResult> =>
    agentStep(def, journal, ports, { now: T0, receiveCount });
  return { server: agent, port, model, ports, step, tool, journal: await begin(ports) };
}

const ASK: Turn = {
  call: ["open_invoice", { message: "Open an invoice for c-7", data: { amount: 12 } }],
};

async function throughCall(c: Awaited<ReturnType<typeof clerk>>) {
  const turn = await c.step(c.journal);
  return c.step(commit(turn.journal));
}

describe("an agent with another system's A2A agent as a tool", () => {
  it("is shown the card's skill and sends a write once under the step's key", async () => {
    const c = await clerk([ASK, { text: JSON.stringify({ invoice: "INV-1" }) }]);
    const called = await throughCall(c);
    expect(called.recorded).toMatchObject({ outcome: "succeeded (run)", key: KEY_OF_CALL_1 });
    expect(called.wrote?.output).toEqual({ text: "opened INV-1", data: { invoice: "INV-1" } });
    expect(c.server.received).toEqual([
      {
        messageId: KEY_OF_CALL_1,
        text: "Open an invoice for c-7",
        data: { amount: 12 },
        metadata: { [IDEMPOTENCY_KEY_META]: KEY_OF_CALL_1, "io.agentbus/skill": "open_invoice" },
      },
    ]);
    expect(c.model.tool("open_invoice")?.description).toContain("Opens an invoice for a customer");
    expect((await c.ports.sideEffects.get(KEY_OF_CALL_1))?.state).toBe("succeeded");
    const end = await c.step(commit(called.journal));
    expect(end.journal.status).toBe("COMPLETED");
    expect(c.server.invoices).toHaveLength(1);
  });

  it("after a crash between the agent's apply and the commit, the redelivery sends no more", async () => {
    const c = await clerk([ASK, { text: JSON.stringify({ invoice: "INV-1" }) }]);
    const turn = commit((await c.step(c.journal)).journal);
    const crashed = await c.step(turn); // acted on by the agent; its journal is never committed
    expect(crashed.recorded.outcome).toBe("succeeded (run)");
    const redelivered = await c.step(turn, 2);
    expect(redelivered.recorded.outcome).toBe("succeeded (record)");
    expect(c.server.received).toHaveLength(1);
    expect(c.server.invoices).toHaveLength(1);
  });

  it("learns a task that ended after the timeout by tasks/get on its id: one message", async () => {
    const c = await clerk([ASK], { declaration: { timeoutMs: 300 } });
    c.server.answerDelayMs = 1_000;
    const turn = commit((await c.step(c.journal)).journal);
    const first = await c.step(turn).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(TransientError);
    expect((await c.ports.sideEffects.get(KEY_OF_CALL_1))?.state).toBe("unknown");
    await new Promise((r) => setTimeout(r, 1_200));
    const again = await c.step(turn, 2);
    expect(again.recorded.outcome).toBe("succeeded (query)");
    expect(again.wrote?.output).toMatchObject({ text: "opened INV-1" });
    expect(c.server.received).toHaveLength(1);
    expect(c.server.reads.get).toBeGreaterThanOrEqual(2);
  });

  it("in another container, finds the task by the key's context (tasks/list)", async () => {
    const c = await clerk([ASK], { declaration: { timeoutMs: 300 } });
    c.server.answerDelayMs = 1_000;
    const turn = commit((await c.step(c.journal)).journal);
    await expect(c.step(turn)).rejects.toBeInstanceOf(TransientError);
    await new Promise((r) => setTimeout(r, 1_200));
    const elsewhere = billingAgent([c.tool()]); // a new tool: it never heard the task's id
    const again = await c.step(turn, 2, elsewhere);
    expect(again.recorded.outcome).toBe("succeeded (query)");
    expect(c.server.reads.list).toBe(1);
    expect(c.server.received).toHaveLength(1);
  });

  it("a task still working when the agent answered makes the run wait on it; its poll reads the result: one message", async () => {
    const c = await clerk([ASK, { text: JSON.stringify({ invoice: "INV-1" }) }]);
    const send = c.port.send.bind(c.port);
    const getTask = c.port.getTask.bind(c.port);
    // The agent answers before its task is done, and the first tasks/get still finds it working.
    c.port.send = async (message) => ({ ...(await send(message)), state: "working" });
    let polls = 0;
    c.port.getTask = async (taskId, timeoutMs) => {
      const view = await getTask(taskId, timeoutMs);
      polls += 1;
      return view && polls === 1 ? { ...view, state: "working" } : view;
    };
    const turn = commit((await c.step(c.journal)).journal);
    const waits = await c.step(turn);
    const taskId = waits.journal.waiting?.remote_task?.id;
    expect(waits.journal.status).toBe("BLOCKED");
    expect(waits.journal.waiting).toMatchObject({
      kind: "task",
      remote_task: { id: expect.any(String), status: "working" },
    });
    expect((await c.ports.sideEffects.get(KEY_OF_CALL_1))?.operation).toBe(taskId);
    const poll = async (journal: AgentJournal, seconds: number) => {
      const now = new Date(T0.getTime() + seconds * 1000);
      const due = taskPollDue(commit(journal), now) as AgentJournal;
      return agentStep(billingAgent([c.tool()]), due, c.ports, { now, receiveCount: 1 });
    };
    const still = await poll(waits.journal, 60);
    expect(still.journal.waiting?.remote_task).toEqual({ id: taskId, status: "working" });
    const done = await poll(still.journal, 120);
    expect(done.recorded.outcome).toBe("succeeded (poll)");
    expect(done.wrote?.output).toEqual({ text: "opened INV-1", data: { invoice: "INV-1" } });
    expect(c.server.received).toHaveLength(1);
    expect(c.server.invoices).toHaveLength(1);
  });

  it("records a failed task as failed, and tells the model", async () => {
    const c = await clerk([{ call: ["open_invoice", { message: "please refuse this" }] }]);
    const called = await throughCall(c);
    expect(called.recorded.outcome).toBe("failed: a2a.task_failed");
    expect((await c.ports.sideEffects.get(KEY_OF_CALL_1))?.state).toBe("failed");
    const texts = await conversationTexts(called.journal, c.ports.content);
    expect(texts.join("\n")).toContain("invoice refused");
  });

  it("records a rejected task, and one asking for input, as failed with their codes", async () => {
    const rejected = await throughCall(
      await clerk([{ call: ["open_invoice", { message: "reject it" }] }]),
    );
    expect(rejected.recorded.outcome).toBe("failed: a2a.task_rejected");
    await agent?.close();
    const more = await throughCall(await clerk([{ call: ["open_invoice", { message: "more" }] }]));
    expect(more.recorded.outcome).toBe("failed: a2a.input_required");
  });
});

describe("the A2A agent's card", () => {
  it("refuses a skill the card does not list, and a card other than the pinned one", async () => {
    const c = await clerk([ASK], { declaration: { skill: "refund" } });
    await expect(c.step(c.journal)).rejects.toMatchObject({ code: "a2a.skill_not_listed" });
    const pin = await a2aCardHash(c.port);
    expect(pin).toMatch(/^sha256:[0-9a-f]{64}$/);
    const pinned = billingAgent([a2aTool(c.port, { ...BILLING, pin })]);
    expect((await c.step(c.journal, 1, pinned)).journal.status).toBe("RUNNING");
    const other = billingAgent([a2aTool(c.port, { ...BILLING, pin: `sha256:${"0".repeat(64)}` })]);
    await expect(c.step(c.journal, 1, other)).rejects.toMatchObject({ code: "a2a.card_changed" });
  });

  it("says clearly that a URL holds no agent card", async () => {
    agent = await startTestA2aAgent();
    const wrong = new SdkA2aAgent({
      url: agent.cardUrl.replace("agent-card", "nothing"),
      token: async () => A2A_TOKEN,
    });
    const error = await wrong.card().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({ code: "a2a.bad_card" });
    expect((error as Error).message).toContain("cannot be used");
  });

  it("is not read without the agent's token: a 401 is retried, not a refusal", async () => {
    agent = await startTestA2aAgent();
    const stranger = new SdkA2aAgent({ url: agent.cardUrl, token: async () => "wrong" });
    await expect(stranger.card()).rejects.toMatchObject({ code: "a2a.unavailable" });
    await expect(stranger.card()).rejects.toBeInstanceOf(TransientError);
  });
});

describe("another system's A2A agent as a workflow step", () => {
  const context = (receiveCount: number): StepContext => ({
    runId: "run_flow_1",
    nodeId: "invoice",
    generation: 1,
    attempt: 1,
    role: "billing",
    taskId: TASK,
    now: T0,
    receiveCount,
  });

  it("sends the node's input once per assignment and completes with the agent's answer", async () => {
    agent = await startTestA2aAgent();
    const port = new SdkA2aAgent({ url: agent.cardUrl, token: async () => A2A_TOKEN });
    const ledger = new InMemorySideEffects();
    const step = a2aStep(port, ledger, { agent: "billing", skill: "open_invoice" });
    const input = { message: "Open an invoice", customer_id: "c-7" };
    expect(await step(input, context(1))).toEqual({
      text: "opened INV-1",
      data: { invoice: "INV-1" },
    });
    // The step role's record was lost (a crash before its commit): the request comes again.
    expect(await step(input, context(2))).toEqual({
      text: "opened INV-1",
      data: { invoice: "INV-1" },
    });
    expect(agent.received).toEqual([
      expect.objectContaining({
        messageId: `${TASK}:run_flow_1:invoice:1`,
        text: "Open an invoice",
        data: { customer_id: "c-7" },
      }),
    ]);
  });

  it("fails with the agent's refusal", async () => {
    agent = await startTestA2aAgent();
    const port = new SdkA2aAgent({ url: agent.cardUrl, token: async () => A2A_TOKEN });
    const step = a2aStep(port, new InMemorySideEffects(), { agent: "billing" });
    await expect(step({ message: "refuse" }, context(1))).rejects.toMatchObject({
      code: "a2a.task_failed",
    });
  });
});

describe("the A2A integration's twin", () => {
  const run = async (tool: AnyTool, receiveCount = 1) => {
    const model = new ScriptedModel([ASK]);
    const ports = {
      model,
      content: new InMemoryContentStore(),
      sideEffects: new InMemorySideEffects(),
    };
    const definition = billingAgent([tool]);
    const turn = commit(
      (await agentStep(definition, await begin(ports), ports, { now: T0, receiveCount })).journal,
    );
    return { ports, called: await agentStep(definition, turn, ports, { now: T0, receiveCount }) };
  };

  it("answers a write that timed out after acting from its task: one message", async () => {
    const twin = new InMemoryA2aAgent();
    twin.failNext("timeout after acting");
    const { called } = await run(a2aTool(twin, { name: "open_invoice", agent: "billing" }));
    expect(called.recorded.outcome).toBe("succeeded (query after timeout)");
    expect(twin.received).toHaveLength(1);
  });

  it("sends a read without the ledger, under a message id of its own", async () => {
    const twin = new InMemoryA2aAgent();
    const { ports, called } = await run(
      a2aTool(twin, { name: "open_invoice", agent: "billing", effect: "read" }),
    );
    expect(called.recorded.outcome).toBe("succeeded (run)");
    expect(await ports.sideEffects.get(KEY_OF_CALL_1)).toBeUndefined();
    expect(twin.received[0]?.messageId).not.toBe(KEY_OF_CALL_1);
    expect(twin.received[0]?.metadata).toEqual({});
  });
});
