import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import * as z from "zod";
import { IDEMPOTENCY_KEY_META } from "../../functions/integrations/mcp/port";

/**
 * An MCP server from the official SDK, run by a test on 127.0.0.1 in the stateless mode (a new
 * server and transport per request, no session), that counts the calls it receives. Its tools, a
 * small help desk:
 * - `lookup_customer` (reads): a customer's name;
 * - `create_ticket` (writes): opens a ticket under the idempotency key of the request's `_meta`
 *   (or its `idempotency_key` argument); a key it has seen gives the same ticket again when it
 *   `dedupes`, a new ticket when it does not; a subject with "refuse" is refused (`isError`);
 * - `find_ticket` (reads): the ticket opened under a key, or `isError` when there is none;
 * - `export_history` (writes, task-required: `execution.taskSupport: "required"`): starts an export
 *   as a task (one task store for all requests), which completes `taskMs` later with the export's
 *   id, or fails (`isError`) for a customer id with "fail" (while `holdTasks` is set, when the
 *   test calls `finishHeldTasks`); the task's `pollInterval` is `taskPollMs`.
 * It takes requests with `Authorization: Bearer <token>` only (401 otherwise).
 */

export interface TestMcpServer {
  readonly url: string;
  /** `tools/call` requests received, by tool. */
  readonly calls: Record<string, number>;
  /** Tickets opened (each an applied write), in order. */
  readonly tickets: { readonly id: string; readonly key: string; readonly subject: string }[];
  /** The `_meta` and arguments of each `create_ticket` request, in order. */
  readonly received: { meta: Record<string, unknown>; args: Record<string, unknown> }[];
  /** Milliseconds `create_ticket` waits after opening a ticket, before it answers. */
  answerDelayMs: number;
  /** Exports started (each a task created), in order, with the key they were started under. */
  readonly exports: { readonly id: string; readonly key: string; readonly taskId: string }[];
  /** Milliseconds an export's task works before it ends. */
  taskMs: number;
  /** Exports started while set work until `finishHeldTasks` (however long `taskMs` is). */
  holdTasks: boolean;
  /** Ends the held exports' tasks now (completed, or failed for a customer with "fail"). */
  finishHeldTasks(): void;
  /** The `pollInterval` the export's task names, in milliseconds. */
  taskPollMs: number;
  close(): Promise<void>;
}

export const MCP_TOKEN = "token-for-tests";

export async function startTestMcpServer(
  options: { readonly dedupes?: boolean } = {},
): Promise<TestMcpServer> {
  const state = {
    calls: {} as Record<string, number>,
    tickets: [] as TestMcpServer["tickets"][number][],
    received: [] as TestMcpServer["received"],
    answerDelayMs: 0,
    exports: [] as TestMcpServer["exports"][number][],
    taskMs: 300,
    taskPollMs: 100,
    holdTasks: false,
    held: [] as (() => void)[],
    finishHeldTasks() {
      for (const finish of state.held.splice(0)) finish();
    },
  };
  const tasks = new InMemoryTaskStore();
  const http = createServer(async (req, res) => {
    if (req.headers.authorization !== `Bearer ${MCP_TOKEN}`) {
      res.writeHead(401).end("unauthorized");
      return;
    }
    const server = helpDesk(state, options.dedupes ?? false, tasks);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  const url = await listening(http);
  // The same object the handlers read: a test that sets answerDelayMs sets theirs.
  return Object.assign(state, {
    url,
    close: () =>
      new Promise<void>((done) => {
        http.closeAllConnections();
        http.close(() => done());
      }),
  });
}

async function listening(http: Server): Promise<string> {
  await new Promise<void>((done) => http.listen(0, "127.0.0.1", done));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
}

type State = Omit<TestMcpServer, "url" | "close"> & { held: (() => void)[] };

const TASK_CAPABILITIES = { tasks: { requests: { tools: { call: {} } } } };

const text = (value: unknown) => [{ type: "text" as const, text: JSON.stringify(value) }];

function helpDesk(state: State, dedupes: boolean, taskStore: InMemoryTaskStore): McpServer {
  const server = new McpServer(
    { name: "help-desk", version: "1.0.0" },
    { capabilities: TASK_CAPABILITIES, taskStore },
  );
  const counted = (tool: string) => {
    state.calls[tool] = (state.calls[tool] ?? 0) + 1;
  };
  server.registerTool(
    "lookup_customer",
    { description: "A customer's name.", inputSchema: { customer_id: z.string().min(1) } },
    async ({ customer_id }) => {
      counted("lookup_customer");
      const found = { customer_id, name: `Customer ${customer_id}` };
      return { content: text(found), structuredContent: found };
    },
  );
  server.registerTool(
    "create_ticket",
    {
      description: "Open a support ticket.",
      inputSchema: {
        customer_id: z.string().min(1),
        subject: z.string().min(1),
        idempotency_key: z.string().optional(),
      },
    },
    async (args, extra) => {
      counted("create_ticket");
      const meta = { ...(extra._meta ?? {}) } as Record<string, unknown>;
      state.received.push({ meta, args });
      const key = String(meta[IDEMPOTENCY_KEY_META] ?? args.idempotency_key ?? "");
      if (args.subject.includes("refuse"))
        return { isError: true, content: [{ type: "text", text: "subject refused" }] };
      const seen = state.tickets.find((t) => t.key === key);
      const ticket = dedupes && seen ? seen : { id: `T-${state.tickets.length + 1}`, key, ...args };
      if (ticket !== seen) state.tickets.push({ id: ticket.id, key, subject: args.subject });
      if (state.answerDelayMs > 0) await new Promise((r) => setTimeout(r, state.answerDelayMs));
      return { content: text({ ticket: ticket.id }), structuredContent: { ticket: ticket.id } };
    },
  );
  server.registerTool(
    "find_ticket",
    { description: "The ticket opened under a key.", inputSchema: { idempotency_key: z.string() } },
    async ({ idempotency_key }) => {
      counted("find_ticket");
      const ticket = state.tickets.find((t) => t.key === idempotency_key);
      if (!ticket) return { isError: true, content: [{ type: "text", text: "no such ticket" }] };
      return { content: text({ ticket: ticket.id }), structuredContent: { ticket: ticket.id } };
    },
  );
  exportHistory(server, state, counted, taskStore);
  return server;
}

/** `export_history`: a task that ends `taskMs` after it was created (see the file's comment). */
function exportHistory(
  server: McpServer,
  state: State,
  counted: (tool: string) => void,
  tasks: InMemoryTaskStore,
): void {
  server.experimental.tasks.registerToolTask(
    "export_history",
    {
      description: "Export a customer's history (a long-running task).",
      inputSchema: { customer_id: z.string().min(1) },
      execution: { taskSupport: "required" },
    },
    {
      async createTask({ customer_id }, extra) {
        counted("export_history");
        const meta = { ...(extra._meta ?? {}) } as Record<string, unknown>;
        const key = String(meta[IDEMPOTENCY_KEY_META] ?? "");
        const task = await extra.taskStore.createTask({
          ttl: extra.taskRequestedTtl ?? null,
          pollInterval: state.taskPollMs,
        });
        const id = `E-${state.exports.length + 1}`;
        state.exports.push({ id, key, taskId: task.taskId });
        const finish = () => {
          const failed = customer_id.includes("fail");
          const result = failed
            ? {
                isError: true,
                content: [{ type: "text" as const, text: "the archive is offline" }],
              }
            : { content: text({ export: id }), structuredContent: { export: id } };
          // The shared store: the request's would tell its server, closed by now, the status.
          void tasks.storeTaskResult(task.taskId, failed ? "failed" : "completed", result);
        };
        if (state.holdTasks) state.held.push(finish);
        else setTimeout(finish, state.taskMs);
        return { task };
      },
      getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) =>
        (await extra.taskStore.getTaskResult(extra.taskId)) as never,
    },
  );
}
