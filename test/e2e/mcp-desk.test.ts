import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mcpAdapter } from "../../functions/integrations/mcp/aws";
import type { McpCall, McpCallResult, McpServerPort } from "../../functions/integrations/mcp/port";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { crash, currentInvocation } from "../../lib/dev/local/runtime/faults";
import { sideEffectOf } from "../../lib/dev/local/scenario/customer-support";
import { runReaches } from "../../lib/dev/local/scenario/refund";
import { deskRunId } from "../fixtures/mcp-desk";
import { DESK_TICKET_REQUESTED } from "../fixtures/mcp-desk/events";
import { EXPORT_MARKER } from "../fixtures/mcp-desk/local-script";
import { MCP_DESK_STACK } from "../fixtures/mcp-desk/stack";
import { MCP_TOKEN, startTestMcpServer, type TestMcpServer } from "../support/mcp-server";
import {
  askAgent,
  type OutsideAgentStack,
  startOutsideAgentStack,
} from "../support/outside-agent-stack";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * An agent whose tools are an MCP server's, on the local stack: the MCP desk of
 * test/fixtures/mcp-desk, its steps through the deployed queues, against the official SDK's
 * McpServer on 127.0.0.1 (test/support/mcp-server.ts), which counts the calls it receives. The
 * desk's `mcp` port is the one its adapter builds, its token read from the emulator's Parameter
 * Store, for the server the test runs (the stand-in of the integration: the URL the role names is
 * not this one). A crash of the invocation after the server applied `create_ticket` and before the
 * step committed (the runtime's fault hook, `crash`), and a timeout after the server applied it,
 * each leave exactly one ticket at the server. A tool the server runs as a task (`export_history`)
 * is called as one and its task polled to its result.
 */

const TIMEOUT = 120_000;
const TOKEN_PARAMETER = "/help-desk/mcp-token";

/** The adapter's port, whose next `create_ticket` may crash its invocation once it has answered. */
class CrashingMcpServer implements McpServerPort {
  crashAfterCreate = false;
  crashes = 0;
  constructor(private readonly inner: McpServerPort) {}
  listTools() {
    return this.inner.listTools();
  }
  async callTool(call: McpCall): Promise<McpCallResult> {
    const result = await this.inner.callTool(call);
    const invocation = currentInvocation();
    if (call.name === "create_ticket" && this.crashAfterCreate && invocation) {
      this.crashAfterCreate = false;
      this.crashes += 1;
      throw crash(invocation, "create_ticket");
    }
    return result;
  }
  startTask(call: McpCall) {
    return this.inner.startTask(call);
  }
  getTask(taskId: string, timeoutMs: number) {
    return this.inner.getTask(taskId, timeoutMs);
  }
  taskResult(taskId: string, timeoutMs: number) {
    return this.inner.taskResult(taskId, timeoutMs);
  }
}

describe("an agent using an MCP server's tools on the local stack", () => {
  let stack: OutsideAgentStack;
  let env: LocalEnvironment;
  let server: TestMcpServer;
  let port: CrashingMcpServer;

  beforeAll(async () => {
    server = await startTestMcpServer();
    stack = await startOutsideAgentStack({
      stack: MCP_DESK_STACK,
      stagePrefix: "mcp",
      token: { parameter: TOKEN_PARAMETER, value: MCP_TOKEN },
      standIns: (ssm) => {
        port = new CrashingMcpServer(
          mcpAdapter.build(
            { group: "mcp-desk", env: {}, client: ssm, warn: () => {} },
            { url: server.url, credentials: { parameter: TOKEN_PARAMETER } },
          ),
        );
        return { mcp: port };
      },
    });
    env = stack.env;
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(async () => {
    await stack?.stop();
    await server?.close();
  });

  /** Asks the desk for a ticket, as a client would; the run's id. */
  async function askForTicket(customerId: string, subject: string): Promise<string> {
    const request = await askAgent(env, {
      type: DESK_TICKET_REQUESTED,
      orderKey: customerId,
      aggregateType: "desk_request",
      producer: "help-desk-client",
      payload: { customer_id: customerId, subject },
    });
    return deskRunId(request.task_id);
  }

  const ticketsOf = (customerId: string) =>
    server.tickets.filter((t) => t.subject.startsWith(customerId));

  it(
    "answers: looks the customer up and opens one ticket under its call's key",
    async () => {
      const runId = await askForTicket("c-1", "c-1 cannot log in");
      const done = await runReaches(env, runId, "COMPLETED", TIMEOUT);
      const [ticket] = ticketsOf("c-1");
      expect(ticket?.key).toBe(`${done.task_id}:${runId}:2:call_2`);
      expect(done.output).toEqual({ ticket: ticket?.id });
      expect(ticketsOf("c-1")).toHaveLength(1);
      expect(done.totals).toMatchObject({ model_turns: 3, tool_calls: 2 });
      expect(await sideEffectOf(env, ticket?.key ?? "")).toMatchObject({ state: "succeeded" });
    },
    TIMEOUT,
  );

  it(
    "a crash after the server applied the write and before the commit gives exactly one call there",
    async () => {
      const calls = server.calls.create_ticket ?? 0;
      port.crashAfterCreate = true;
      const runId = await askForTicket("c-2", "c-2 was charged twice");
      const done = await runReaches(env, runId, "COMPLETED", TIMEOUT);
      expect(port.crashes).toBe(1);
      // One create_ticket at the server: the redelivered step asked find_ticket by the key.
      expect((server.calls.create_ticket ?? 0) - calls).toBe(1);
      const [ticket] = ticketsOf("c-2");
      expect(ticketsOf("c-2")).toHaveLength(1);
      expect(done.output).toEqual({ ticket: ticket?.id });
      expect(done.window.find((s) => s.tool === "create_ticket")?.outcome).toBe(
        "succeeded (query)",
      );
      expect(await sideEffectOf(env, ticket?.key ?? "")).toMatchObject({
        state: "succeeded",
        attempts: 2,
      });
    },
    TIMEOUT,
  );

  it(
    "a timeout after the server applied the write is resolved by the ledger's query",
    async () => {
      const calls = server.calls.create_ticket ?? 0;
      // The desk waits 2 s for an answer; the server opens the ticket, then answers after 4 s.
      server.answerDelayMs = 4_000;
      try {
        const runId = await askForTicket("c-3", "c-3 needs an invoice");
        const done = await runReaches(env, runId, "COMPLETED", TIMEOUT);
        expect((server.calls.create_ticket ?? 0) - calls).toBe(1);
        const [ticket] = ticketsOf("c-3");
        expect(ticketsOf("c-3")).toHaveLength(1);
        expect(done.output).toEqual({ ticket: ticket?.id });
        expect(done.window.find((s) => s.tool === "create_ticket")?.outcome).toBe(
          "succeeded (query after timeout)",
        );
      } finally {
        server.answerDelayMs = 0;
      }
    },
    TIMEOUT,
  );

  it(
    "a tool the server runs as a task is called as one: created once, its result the answer",
    async () => {
      const exports = server.exports.length;
      const runId = await askForTicket("c-4", `c-4 wants the history ${EXPORT_MARKER}`);
      const done = await runReaches(env, runId, "COMPLETED", TIMEOUT);
      const made = server.exports.slice(exports);
      expect(made).toEqual([
        {
          id: expect.any(String),
          key: `${done.task_id}:${runId}:2:call_2`,
          taskId: expect.any(String),
        },
      ]);
      expect(done.output).toEqual({ export: made[0]?.id });
      expect(done.window.find((s) => s.tool === "export_history")?.outcome).toBe("succeeded (run)");
    },
    TIMEOUT,
  );
});
