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
import { PermanentError, TransientError } from "../../functions/core/errors";
import type {
  ModelPort,
  ModelRequest,
  ModelResponse,
  ModelToolSpec,
} from "../../functions/core/model";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import {
  type McpToolsDeclaration,
  mcpListingHash,
  mcpTools,
} from "../../functions/integrations/mcp/index";
import { IDEMPOTENCY_KEY_META } from "../../functions/integrations/mcp/port";
import { MAX_TOOL_LIST_PAGES, SdkMcpServer } from "../../functions/integrations/mcp/sdk-server";
import * as z from "../../schemas/zod";
import { firstJournal } from "../support/agent-journal";
import { MCP_TOKEN, startTestMcpServer, type TestMcpServer } from "../support/mcp-server";

/**
 * An agent whose tools are an MCP server's (functions/integrations/mcp), through the official
 * SDK's client against the SDK's own server on 127.0.0.1 (test/support/mcp-server.ts), which
 * counts the calls it receives. The agent loop is driven step by step; a step's journal is
 * committed (a JSON round trip) before the next reads it, and a crash is a step whose journal is
 * never committed, taken again by the next delivery.
 */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const RUN = "run_desk_1";
const T0 = new Date("2026-03-01T09:00:00.000Z");
/** The key of the first turn's call `call_1` (`<task>:<run>:<turn>:<call>`). */
const KEY_OF_CALL_1 = `${TASK}:${RUN}:1:call_1`;

const Answer = z.object({ ticket: z.string() });

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

const DESK: McpToolsDeclaration = {
  server: "help-desk",
  tools: {
    lookup_customer: { effect: "read" },
    create_ticket: { query: { tool: "find_ticket", keyArgument: "idempotency_key" } },
  },
  timeoutMs: 2_000,
};

function deskAgent(tools: AnyTool[], maxUnknownAttempts = 3): AgentDefinition {
  return defineAgent({
    name: "desk",
    instructions: "Open a ticket for the customer.",
    tools,
    output: Answer,
    schemas: {
      answer: {
        type: "object",
        properties: { ticket: { type: "string" } },
        required: ["ticket"],
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
    agent: "desk",
    stem: "desk",
    subject: { customer_id: "c-7" },
    text: "Help c-7.",
    now: T0,
  });
}

const commit = (journal: AgentJournal) => JSON.parse(JSON.stringify(journal)) as AgentJournal;

let server: TestMcpServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function desk(
  turns: readonly Turn[],
  options: { declaration?: McpToolsDeclaration; dedupes?: boolean; unknownAttempts?: number } = {},
) {
  server = await startTestMcpServer({ dedupes: options.dedupes });
  const port = new SdkMcpServer({ url: server.url, token: async () => MCP_TOKEN });
  const model = new ScriptedModel(turns);
  const ports = {
    model,
    content: new InMemoryContentStore(),
    sideEffects: new InMemorySideEffects(),
  };
  const agent = deskAgent(
    mcpTools(port, options.declaration ?? DESK),
    options.unknownAttempts ?? 3,
  );
  const step = (journal: AgentJournal, receiveCount = 1): Promise<StepResult> =>
    agentStep(agent, journal, ports, { now: T0, receiveCount });
  return { server, port, model, ports, step, journal: await begin(ports) };
}

const TICKET: Turn = { call: ["create_ticket", { customer_id: "c-7", subject: "broken lamp" }] };

/** The step's journal, committed, after the model's turn and the call it asked for. */
async function throughCall(d: Awaited<ReturnType<typeof desk>>) {
  const turn = await d.step(d.journal);
  return d.step(commit(turn.journal));
}

describe("an agent with an MCP server's tools", () => {
  it("is shown the server's listing and answers with a read tool's answer", async () => {
    const d = await desk([
      { call: ["lookup_customer", { customer_id: "c-7" }] },
      { text: JSON.stringify({ ticket: "none needed" }) },
    ]);
    const called = await throughCall(d);
    expect(called.recorded.outcome).toBe("succeeded (run)");
    const end = await d.step(commit(called.journal));
    expect(end.journal.status).toBe("COMPLETED");
    expect(end.journal.output).toEqual({ ticket: "none needed" });
    expect(d.server.calls).toEqual({ lookup_customer: 1 });
    expect(d.model.tool("lookup_customer")).toMatchObject({
      description: "A customer's name.",
      inputSchema: { properties: { customer_id: { type: "string" } } },
    });
    const seen = (await conversationTexts(end.journal, d.ports.content)).join("\n");
    expect(seen).toContain("Customer c-7");
  });

  it("runs a write once under the step's key, sent in _meta", async () => {
    const d = await desk([TICKET, { text: JSON.stringify({ ticket: "T-1" }) }]);
    const called = await throughCall(d);
    expect(called.recorded).toMatchObject({ outcome: "succeeded (run)", key: KEY_OF_CALL_1 });
    expect(called.wrote?.output).toEqual({
      text: '{"ticket":"T-1"}',
      structured: { ticket: "T-1" },
    });
    expect(d.server.received).toEqual([
      {
        meta: { [IDEMPOTENCY_KEY_META]: KEY_OF_CALL_1 },
        args: { customer_id: "c-7", subject: "broken lamp" },
      },
    ]);
    expect((await d.ports.sideEffects.get(KEY_OF_CALL_1))?.state).toBe("succeeded");
    expect(d.server.tickets).toHaveLength(1);
  });

  it("sends the key in the argument the author names, too", async () => {
    const declaration: McpToolsDeclaration = {
      ...DESK,
      tools: { create_ticket: { keyArgument: "idempotency_key", dedupes: true } },
    };
    const d = await desk([TICKET], { declaration });
    await throughCall(d);
    // The key's argument is the hub's to give, not the model's.
    const shown = d.model.tool("create_ticket")?.inputSchema;
    expect(shown?.properties).not.toHaveProperty("idempotency_key");
    expect(shown?.required).toEqual(["customer_id", "subject"]);
    expect(d.server.received[0]?.args).toEqual({
      customer_id: "c-7",
      subject: "broken lamp",
      idempotency_key: KEY_OF_CALL_1,
    });
  });

  it("records an isError result as failed, and tells the model", async () => {
    const d = await desk([{ call: ["create_ticket", { customer_id: "c-7", subject: "refuse" }] }]);
    const called = await throughCall(d);
    expect(called.recorded.outcome).toBe("failed: mcp.tool_error");
    expect((await d.ports.sideEffects.get(KEY_OF_CALL_1))?.state).toBe("failed");
    const texts = await conversationTexts(called.journal, d.ports.content);
    expect(texts.join("\n")).toContain("subject refused");
    expect(d.server.tickets).toEqual([]);
  });

  it("refuses input that does not fit the listed schema, calling nothing", async () => {
    const d = await desk([{ call: ["create_ticket", { customer_id: "c-7" }] }]);
    const turn = await d.step(d.journal);
    expect(turn.journal.totals.refused_calls).toBe(1);
    const texts = await conversationTexts(turn.journal, d.ports.content);
    expect(texts.join("\n")).toContain("(input).subject: is required");
    expect(d.server.calls).toEqual({});
  });

  it("learns a write that timed out after the server applied it by the query: one ticket", async () => {
    const d = await desk([TICKET], { declaration: { ...DESK, timeoutMs: 300 } });
    d.server.answerDelayMs = 1_500;
    const called = await throughCall(d);
    expect(called.recorded.outcome).toBe("succeeded (query after timeout)");
    expect(d.server.calls).toMatchObject({ create_ticket: 1, find_ticket: 1 });
    expect(d.server.tickets).toHaveLength(1);
  });

  it("learns it by a call again under the same key when the server dedupes", async () => {
    const declaration: McpToolsDeclaration = {
      ...DESK,
      timeoutMs: 300,
      tools: { create_ticket: { dedupes: true } },
    };
    const d = await desk([TICKET], { declaration, dedupes: true });
    d.server.answerDelayMs = 1_500;
    const turn = commit((await d.step(d.journal)).journal);
    const first = await d.step(turn).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(TransientError);
    expect((first as TransientError).code).toBe("tool.outcome_unknown");
    expect((await d.ports.sideEffects.get(KEY_OF_CALL_1))?.state).toBe("unknown");
    d.server.answerDelayMs = 0;
    const again = await d.step(turn, 2);
    expect(again.recorded.outcome).toBe("succeeded (retry)");
    expect(d.server.calls.create_ticket).toBe(2);
    expect(d.server.tickets).toHaveLength(1);
  });

  it("hands an outcome it cannot learn to a person, never calling under a new key", async () => {
    const declaration: McpToolsDeclaration = {
      ...DESK,
      timeoutMs: 300,
      tools: { create_ticket: {} },
    };
    const d = await desk([TICKET], { declaration, unknownAttempts: 2 });
    d.server.answerDelayMs = 1_500;
    const turn = commit((await d.step(d.journal)).journal);
    await expect(d.step(turn)).rejects.toBeInstanceOf(TransientError);
    const handed = await d.step(turn, 2);
    expect(handed.journal.status).toBe("NEEDS_HUMAN");
    expect(handed.journal.waiting).toMatchObject({ kind: "outcome", key: KEY_OF_CALL_1 });
    expect(d.server.calls.create_ticket).toBe(1);
  });

  it("after a crash between the server's apply and the commit, the redelivery calls no more", async () => {
    const d = await desk([TICKET, { text: JSON.stringify({ ticket: "T-1" }) }]);
    const turn = commit((await d.step(d.journal)).journal);
    const crashed = await d.step(turn); // applied at the server; its journal is never committed
    expect(crashed.recorded.outcome).toBe("succeeded (run)");
    const redelivered = await d.step(turn, 2);
    expect(redelivered.recorded.outcome).toBe("succeeded (record)");
    expect(d.server.calls.create_ticket).toBe(1);
    expect(d.server.tickets).toHaveLength(1);
    const end = await d.step(commit(redelivered.journal));
    expect(end.journal.status).toBe("COMPLETED");
  });

  it("after a crash between the claim and the ledger's record, asks the server by key", async () => {
    const d = await desk([TICKET]);
    const turn = commit((await d.step(d.journal)).journal);
    // The write reached the server, but the worker died before recording its outcome.
    const { sideEffects } = d.ports;
    await sideEffects.claim(KEY_OF_CALL_1, { task_id: TASK, kind: "create_ticket" }, T0);
    const tools = mcpTools(d.port, DESK);
    const create = tools.find((t) => t.name === "create_ticket") as AnyTool;
    await create.run(
      { customer_id: "c-7", subject: "broken lamp" },
      { key: KEY_OF_CALL_1, taskId: TASK, runId: RUN, toolCallId: "call_1", subject: {}, now: T0 },
    );
    const redelivered = await d.step(turn, 2);
    expect(redelivered.recorded.outcome).toBe("succeeded (query)");
    expect(d.server.calls).toMatchObject({ create_ticket: 1, find_ticket: 1 });
    expect(d.server.tickets).toHaveLength(1);
  });
});

describe("the MCP server's listing", () => {
  it("refuses a tool the author names that the server does not list", async () => {
    const declaration = { ...DESK, tools: { close_ticket: {} } };
    const d = await desk([TICKET], { declaration });
    const error = await d.step(d.journal).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect((error as PermanentError).code).toBe("mcp.tool_not_listed");
    expect((error as PermanentError).message).toContain("does not list close_ticket");
  });

  it("runs with the listing it was pinned to, and refuses another", async () => {
    const d = await desk([{ text: JSON.stringify({ ticket: "none" }) }]);
    const pin = await mcpListingHash(d.port, DESK);
    expect(pin).toMatch(/^sha256:[0-9a-f]{64}$/);
    const pinned = deskAgent(mcpTools(d.port, { ...DESK, pin }));
    const context = { now: T0, receiveCount: 1 };
    expect((await agentStep(pinned, d.journal, d.ports, context)).journal.status).toBe("COMPLETED");
    const other = deskAgent(mcpTools(d.port, { ...DESK, pin: `sha256:${"0".repeat(64)}` }));
    await expect(agentStep(other, d.journal, d.ports, context)).rejects.toMatchObject({
      code: "mcp.listing_changed",
    });
  });

  it("changes its hash when the server starts running a named tool as a task", async () => {
    const d = await desk([]);
    const listed = await d.port.listTools();
    /** The same server, listing `tools`. */
    const listing = (tools: typeof listed): typeof d.port =>
      Object.assign(Object.create(d.port), { listTools: async () => tools });
    const asTask = listing(
      listed.map((tool) =>
        tool.name === "create_ticket" ? { ...tool, taskSupport: "required" as const } : tool,
      ),
    );
    const before = await mcpListingHash(d.port, DESK);
    expect(await mcpListingHash(asTask, DESK)).not.toBe(before);
    expect(await mcpListingHash(listing(listed), DESK)).toBe(before);
  });

  it("is read once per container, whatever the steps", async () => {
    const d = await desk([
      { call: ["lookup_customer", { customer_id: "c-7" }] },
      { text: JSON.stringify({ ticket: "none" }) },
    ]);
    let lists = 0;
    const counting = {
      listTools: () => {
        lists += 1;
        return d.port.listTools();
      },
      callTool: d.port.callTool.bind(d.port),
      startTask: d.port.startTask.bind(d.port),
      getTask: d.port.getTask.bind(d.port),
      taskResult: d.port.taskResult.bind(d.port),
    };
    const agent = deskAgent(mcpTools(counting, DESK));
    let journal = d.journal;
    for (let i = 0; i < 3; i++)
      journal = commit(
        (await agentStep(agent, journal, d.ports, { now: T0, receiveCount: 1 })).journal,
      );
    expect(journal.status).toBe("COMPLETED");
    expect(lists).toBe(1);
  });

  it("is not read without the server's token: a 401 is retried, not a refusal", async () => {
    const d = await desk([]);
    const stranger = new SdkMcpServer({ url: d.server.url, token: async () => "wrong" });
    await expect(stranger.listTools()).rejects.toMatchObject({ code: "mcp.unavailable" });
    await expect(stranger.listTools()).rejects.toBeInstanceOf(TransientError);
  });

  it("nothing sent to a server that is not there is retried", async () => {
    const d = await desk([]);
    const url = d.server.url;
    await d.server.close();
    server = undefined;
    const gone = new SdkMcpServer({ url, token: async () => MCP_TOKEN });
    await expect(gone.listTools()).rejects.toBeInstanceOf(TransientError);
  });
});

describe("a server's tool listing", () => {
  /** A port whose client answers every tools/list with `page(cursor)`, counting the requests. */
  function listing(
    page: (cursor: string | undefined) => { tools: unknown[]; nextCursor?: string },
  ) {
    const port = new SdkMcpServer({ url: "http://127.0.0.1:9/mcp" });
    const asked: (string | undefined)[] = [];
    const client = {
      request: async ({ params }: { params: { cursor?: string } }) => {
        asked.push(params.cursor);
        return page(params.cursor);
      },
    };
    Object.defineProperty(port, "client", { value: async () => client });
    return { port, asked };
  }
  const tool = (name: string) => ({ name, inputSchema: { type: "object" } });

  it("reads every page a server hands out", async () => {
    const pages: Record<string, { tools: unknown[]; nextCursor?: string }> = {
      start: { tools: [tool("a")], nextCursor: "p2" },
      p2: { tools: [tool("b")], nextCursor: "p3" },
      p3: { tools: [tool("c")] },
    };
    const { port } = listing((cursor) => pages[cursor ?? "start"] ?? { tools: [] });
    expect((await port.listTools()).map((t) => t.name)).toEqual(["a", "b", "c"]);
  });

  it("refuses a listing that hands out a cursor again, for good, having asked once per cursor", async () => {
    const { port, asked } = listing(() => ({ tools: [tool("a")], nextCursor: "x" }));
    const refused = port.listTools();
    await expect(refused).rejects.toBeInstanceOf(PermanentError);
    await expect(refused).rejects.toMatchObject({ code: "mcp.listing_unbounded" });
    expect(asked).toEqual([undefined, "x"]);
  });

  it("refuses a listing that pages past its bound", async () => {
    const { port, asked } = listing((cursor) => ({
      tools: [tool(`t${cursor ?? 0}`)],
      nextCursor: String(Number(cursor ?? 0) + 1),
    }));
    await expect(port.listTools()).rejects.toMatchObject({ code: "mcp.listing_unbounded" });
    expect(asked).toHaveLength(MAX_TOOL_LIST_PAGES);
  });
});
