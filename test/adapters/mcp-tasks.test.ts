import { afterEach, describe, expect, it } from "vitest";
import type { AgentJournal } from "../../functions/core/agent/agent";
import { defineAgent } from "../../functions/core/agent/agent";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import { agentStep } from "../../functions/core/agent/loop";
import { taskPollDue } from "../../functions/core/agent/task-wait";
import type { ModelPort, ModelRequest, ModelResponse } from "../../functions/core/model";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import {
  InMemoryMcpServer,
  type McpToolsDeclaration,
  mcpTools,
} from "../../functions/integrations/mcp/index";
import type { McpServerPort } from "../../functions/integrations/mcp/port";
import { SdkMcpServer } from "../../functions/integrations/mcp/sdk-server";
import * as z from "../../schemas/zod";
import { firstJournal } from "../support/agent-journal";
import { MCP_TOKEN, startTestMcpServer, type TestMcpServer } from "../support/mcp-server";

/**
 * A tool the MCP server runs as a task (`execution.taskSupport: "required"`, the protocol's
 * `tasks`), through the official SDK's client against the SDK's server on 127.0.0.1
 * (test/support/mcp-server.ts: `export_history`, a task that ends `taskMs` after it was created):
 * called task-augmented, its task polled with `tasks/get` at the server's `pollInterval`, its
 * result read with `tasks/result`; a failed task is the tool's refusal; a task still working at
 * the call's timeout makes the run wait on it (its id kept with the ledger's record: a crash or
 * a redelivery polls it, never creates a second), and past its limit a person is asked.
 */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const RUN = "run_export_1";
const T0 = new Date("2026-03-01T09:00:00.000Z");
/** The key of the first turn's call `call_1` (`<task>:<run>:<turn>:<call>`). */
const KEY = `${TASK}:${RUN}:1:call_1`;

/** Asks for `export_history` for the customer, then answers with what the tool said. */
class ExportModel implements ModelPort {
  readonly name = "scripted";
  constructor(private readonly customerId: string) {}
  async converse(request: ModelRequest): Promise<ModelResponse> {
    const answered = request.messages.some((m) => m.toolResults?.length);
    const base = { usage: { inputTokens: 1, outputTokens: 1 }, modelId: "scripted", latencyMs: 1 };
    if (answered) return { ...base, text: JSON.stringify({ done: true }), stopReason: "end_turn" };
    const input = { customer_id: this.customerId };
    const toolCalls = [{ id: "call_1", name: "export_history", input }];
    return { ...base, text: "", toolCalls, stopReason: "tool_use" };
  }
}

const EXPORTS: McpToolsDeclaration = {
  server: "help-desk",
  tools: { export_history: { query: { tool: "find_ticket", keyArgument: "idempotency_key" } } },
  timeoutMs: 3_000,
};

let server: TestMcpServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function exportRun(port: McpServerPort, customerId: string, declaration = EXPORTS) {
  const ports = {
    model: new ExportModel(customerId),
    content: new InMemoryContentStore(),
    sideEffects: new InMemorySideEffects(),
  };
  const agent = defineAgent({
    name: "exports",
    instructions: "Export the customer's history.",
    tools: mcpTools(port, declaration),
    output: z.object({ done: z.boolean() }),
    schemas: { answer: { type: "object", properties: { done: { type: "boolean" } } } },
    maxTurns: 3,
  });
  const journal = await firstJournal(ports.content, {
    runId: RUN,
    taskId: TASK,
    agent: "exports",
    stem: "exports",
    subject: { customer_id: customerId },
    text: "Export c-7.",
    now: T0,
  });
  const step = (j: typeof journal, receiveCount = 1) =>
    agentStep(agent, JSON.parse(JSON.stringify(j)), ports, { now: T0, receiveCount });
  const turn = await step(journal);
  return { ports, agent, step, afterTurn: turn.journal };
}

async function sdkServer() {
  server = await startTestMcpServer();
  return { server, port: new SdkMcpServer({ url: server.url, token: async () => MCP_TOKEN }) };
}

describe("an MCP tool the server runs as a task", () => {
  it("is listed task-required, called as a task, polled, and answers with the task's result", async () => {
    const { server, port } = await sdkServer();
    const listed = (await port.listTools()).find((t) => t.name === "export_history");
    expect(listed?.taskSupport).toBe("required");
    const polls: string[] = [];
    const getTask = port.getTask.bind(port);
    port.getTask = async (taskId, timeoutMs) => {
      const task = await getTask(taskId, timeoutMs);
      polls.push(task.status);
      return task;
    };
    const run = await exportRun(port, "c-7");
    const called = await run.step(run.afterTurn);
    expect(called.recorded).toMatchObject({ outcome: "succeeded (run)", key: KEY });
    expect(called.wrote?.output).toEqual({
      text: '{"export":"E-1"}',
      structured: { export: "E-1" },
    });
    // One task created, under the step's key; the query tool was never asked.
    expect(server.exports).toEqual([{ id: "E-1", key: KEY, taskId: expect.any(String) }]);
    expect(server.calls).toEqual({ export_history: 1 });
    expect((await run.ports.sideEffects.get(KEY))?.state).toBe("succeeded");
    // The task works 300 ms and asks for a poll every 100 ms: tasks/get until it completed.
    expect(polls.length).toBeGreaterThan(1);
    expect(polls.at(-1)).toBe("completed");
    expect(polls.slice(0, -1).every((status) => status === "working")).toBe(true);
  });

  it("a task that failed is the tool's refusal, in the server's words: the model is told", async () => {
    const { port } = await sdkServer();
    const run = await exportRun(port, "c-fail");
    const called = await run.step(run.afterTurn);
    expect(called.recorded.outcome).toBe("failed: mcp.task_failed");
    const record = await run.ports.sideEffects.get(KEY);
    expect(record?.state).toBe("failed");
    expect(record?.error?.message).toContain("the archive is offline");
  });

  it("a task still working at the call's timeout makes the run wait on it, its id kept with the ledger's record", async () => {
    const { server, port } = await sdkServer();
    server.holdTasks = true;
    const run = await exportRun(port, "c-8", { ...EXPORTS, timeoutMs: 1_500 });
    const waits = await run.step(run.afterTurn);
    const taskId = server.exports[0]?.taskId;
    expect(waits.next).toBe("wait");
    expect(waits.journal.status).toBe("BLOCKED");
    expect(waits.journal.waiting).toMatchObject({
      kind: "task",
      tool_call_id: "call_1",
      key: KEY,
      remote_task: { id: taskId, status: "working" },
    });
    // The next poll: the server's 100 ms raised to the least wait, 5 s.
    expect(waits.journal.waiting?.deadline).toBe(new Date(T0.getTime() + 5_000).toISOString());
    expect(waits.recorded.outcome).toBe(`waiting: ${taskId} working`);
    expect(await run.ports.sideEffects.get(KEY)).toMatchObject({
      state: "pending",
      operation: taskId,
    });
    // The step delivered again (its commit lost) asks tasks/get on that task: none created again.
    server.finishHeldTasks();
    const again = await run.step(run.afterTurn, 2);
    expect(again.recorded).toMatchObject({ outcome: "succeeded (poll)", key: KEY });
    expect(again.wrote?.output).toEqual({
      text: '{"export":"E-1"}',
      structured: { export: "E-1" },
    });
    expect(server.calls).toEqual({ export_history: 1 });
    expect(server.exports).toHaveLength(1);
  });

  it("a crash after the server created the task: the redelivered step polls that task, never creates a second", async () => {
    const { server, port } = await sdkServer();
    server.holdTasks = true;
    const getTask = port.getTask.bind(port);
    let crashes = 1;
    // The worker dies while it polls the task it just created, before anything is committed.
    port.getTask = async (taskId, timeoutMs) => {
      if (crashes-- > 0) throw new Error("the worker died");
      return getTask(taskId, timeoutMs);
    };
    const run = await exportRun(port, "c-10");
    await expect(run.step(run.afterTurn)).rejects.toThrow("the worker died");
    expect((await run.ports.sideEffects.get(KEY))?.operation).toBe(server.exports[0]?.taskId);
    const waits = await run.step(run.afterTurn, 2);
    expect(waits.journal.waiting?.remote_task?.status).toBe("working");
    expect(server.calls).toEqual({ export_history: 1 });
  });

  it("a task still working past the tool's limit is unknown: the run waits for a person, nothing created again", async () => {
    const { server, port } = await sdkServer();
    server.holdTasks = true;
    const limited = { ...EXPORTS, tools: { export_history: { taskLimitSeconds: 60 } } };
    const run = await exportRun(port, "c-11", limited);
    const waits = await run.step(run.afterTurn);
    // The sweeper's deadline, 61 s later (as the lease sweeper sends it: the run's decision).
    const at = new Date(T0.getTime() + 61_000);
    const polling = taskPollDue(waits.journal, at);
    expect(taskPollDue(waits.journal, T0)).toBeUndefined();
    expect(polling?.status).toBe("RUNNING");
    const handed = await agentStep(run.agent, polling as AgentJournal, run.ports, {
      now: at,
      receiveCount: 1,
    });
    expect(handed.journal.status).toBe("NEEDS_HUMAN");
    expect(handed.journal.waiting).toMatchObject({ kind: "outcome", tool_call_id: "call_1" });
    const record = await run.ports.sideEffects.get(KEY);
    expect(record?.state).toBe("unknown");
    expect(record?.error?.message).toContain("still working 60 s after it was started");
    expect(server.calls).toEqual({ export_history: 1 });
  });

  it("the in-memory twin lists a task tool and runs it as a task", async () => {
    const twin = new InMemoryMcpServer({
      export_history: {
        task: true,
        inputSchema: { type: "object", properties: { customer_id: { type: "string" } } },
        run: ({ customer_id }) => ({
          isError: false,
          content: [{ type: "text", text: `export of ${String(customer_id)}` }],
        }),
      },
      find_ticket: {
        inputSchema: { type: "object", properties: { idempotency_key: { type: "string" } } },
        run: () => ({ isError: true, content: [] }),
      },
    });
    expect((await twin.listTools())[0]?.taskSupport).toBe("required");
    const run = await exportRun(twin, "c-9");
    const called = await run.step(run.afterTurn);
    expect(called.recorded.outcome).toBe("succeeded (run)");
    expect(called.wrote?.output).toEqual({ text: "export of c-9" });
    expect(twin.calls.map((c) => c.name)).toEqual(["export_history"]);
  });
});
