import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  GetTaskResultSchema,
  ListToolsResultSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { PermanentError, TransientError, UnknownOutcomeError } from "../../core/errors";
import { surelyNotSent } from "../not-sent";
import type { McpCall, McpCallResult, McpListedTool, McpServerPort, McpTask } from "./port";

/**
 * An MCP server over streamable HTTP, through the official SDK's client: one client per container,
 * connected (initialized) on first use with the bearer token `token` gives, and again after a
 * connection that failed or a 401 (the token read again). A server in the stateless mode gives no
 * session: each request stands alone. Requests are sent with `Client.request`, so the client does
 * not check a result against the tool's output schema after the server answered: a write the
 * server applied is never turned into a failure by a check made here (the tool's own output
 * check, functions/core/agent/tool-call.ts, reports it as a bug instead). Errors follow the port's
 * contract (./port.ts). Tasks go the same way: the SDK's task schemas (`CreateTaskResultSchema`,
 * `GetTaskResultSchema`) through `Client.request`, the task asked for by the request's `task`
 * parameter, rather than its experimental `client.experimental.tasks` helpers, whose
 * `callToolStream` waits for the result in-process.
 */

export interface SdkMcpServerOptions {
  /** The streamable HTTP endpoint. */
  readonly url: string;
  /** The bearer token (read when the client connects); none: no Authorization header. */
  readonly token?: () => Promise<string>;
}

const CLIENT_INFO = { name: "agentbus", version: "1" };
/** How long the initialize handshake and a listing may take. */
const SETUP_TIMEOUT_MS = 10_000;
/**
 * The pages of a tool listing read at most. A server's listing is outside input: one that pages
 * without end (a cursor it hands out again, or pages past any real listing) would hold the step
 * until its function times out, on every attempt.
 */
export const MAX_TOOL_LIST_PAGES = 100;

export class SdkMcpServer implements McpServerPort {
  private connected: Promise<Client> | undefined;

  constructor(private readonly options: SdkMcpServerOptions) {}

  async listTools(): Promise<readonly McpListedTool[]> {
    const client = await this.client();
    const tools: McpListedTool[] = [];
    const cursors = new Set<string>();
    let cursor: string | undefined;
    do {
      if (cursor !== undefined) this.checkNextPage(cursors, cursor);
      const params = cursor === undefined ? {} : { cursor };
      const page = await this.sent("tools/list", () =>
        client.request({ method: "tools/list", params }, ListToolsResultSchema, {
          timeout: SETUP_TIMEOUT_MS,
        }),
      );
      tools.push(
        ...page.tools.map(({ execution, ...tool }) =>
          execution?.taskSupport ? { ...tool, taskSupport: execution.taskSupport } : tool,
        ),
      );
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /** Refuses the listing's next page when its cursor came before, or past MAX_TOOL_LIST_PAGES. */
  private checkNextPage(cursors: Set<string>, cursor: string): void {
    const endless = cursors.has(cursor)
      ? `hands out the cursor ${JSON.stringify(cursor.slice(0, 100))} again`
      : cursors.size + 1 >= MAX_TOOL_LIST_PAGES
        ? `pages past ${MAX_TOOL_LIST_PAGES} pages`
        : undefined;
    if (endless)
      throw new PermanentError(
        "mcp.listing_unbounded",
        `MCP server ${this.options.url} lists its tools without end: its tools/list ${endless}`,
      );
    cursors.add(cursor);
  }

  async callTool(call: McpCall): Promise<McpCallResult> {
    const client = await this.client();
    const result = await this.sent(call.name, () =>
      client.request({ method: "tools/call", params: callParams(call) }, CallToolResultSchema, {
        timeout: call.timeoutMs,
      }),
    );
    return callResult(result);
  }

  async startTask(call: McpCall): Promise<McpTask> {
    const client = await this.client();
    const params = { ...callParams(call), task: { ttl: TASK_TTL_MS } };
    const { task } = await this.sent(call.name, () =>
      client.request({ method: "tools/call", params }, CreateTaskResultSchema, {
        timeout: call.timeoutMs,
      }),
    );
    return taskOf(task);
  }

  async getTask(taskId: string, timeoutMs: number): Promise<McpTask> {
    const client = await this.client();
    const task = await this.sent(`tasks/get ${taskId}`, () =>
      client.request({ method: "tasks/get", params: { taskId } }, GetTaskResultSchema, {
        timeout: timeoutMs,
      }),
    );
    return taskOf(task);
  }

  async taskResult(taskId: string, timeoutMs: number): Promise<McpCallResult> {
    const client = await this.client();
    const result = await this.sent(`tasks/result ${taskId}`, () =>
      client.request({ method: "tasks/result", params: { taskId } }, CallToolResultSchema, {
        timeout: timeoutMs,
      }),
    );
    return callResult(result);
  }

  /** The connected client; a failed connection is tried again by the next request. */
  private client(): Promise<Client> {
    this.connected ??= this.connect().catch((error: unknown) => {
      this.connected = undefined;
      throw new TransientError("mcp.unavailable", `MCP server ${this.options.url}: ${error}`, {
        cause: error,
      });
    });
    return this.connected;
  }

  private async connect(): Promise<Client> {
    const token = await this.options.token?.();
    const transport = new StreamableHTTPClientTransport(new URL(this.options.url), {
      ...(token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : {}),
    });
    const client = new Client(CLIENT_INFO);
    await client.connect(transport, { timeout: SETUP_TIMEOUT_MS });
    return client;
  }

  /** A request sent, its error told as the port's contract says. */
  private async sent<T>(what: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (error) {
      throw this.told(what, error);
    }
  }

  private told(what: string, error: unknown): Error {
    const words = `${what} at MCP server ${this.options.url}: ${error instanceof Error ? error.message : String(error)}`;
    if (error instanceof McpError)
      return error.code === ErrorCode.RequestTimeout
        ? new UnknownOutcomeError("mcp.timeout", words, { cause: error })
        : error.code === ErrorCode.ConnectionClosed
          ? new UnknownOutcomeError("mcp.dropped", words, { cause: error })
          : new PermanentError("mcp.protocol_error", words, { details: { code: error.code } });
    if (error instanceof StreamableHTTPError) return this.httpError(error, words);
    if (surelyNotSent(error)) return new TransientError("mcp.unavailable", words, { cause: error });
    return new UnknownOutcomeError("mcp.dropped", words, { cause: error });
  }

  /**
   * An HTTP status: 401 or 404 (credentials rotated, a session the server forgot) -> connect again
   * on the next attempt; 408, 429 -> nothing done, retried; 5xx -> it may have been applied; any
   * other -> refused.
   */
  private httpError(error: StreamableHTTPError, words: string): Error {
    const status = error.code ?? 0;
    if (status === 401 || status === 404) {
      this.connected = undefined;
      return new TransientError("mcp.unavailable", words, { cause: error });
    }
    if (status === 408 || status === 429)
      return new TransientError("mcp.throttled", words, { cause: error });
    if (status >= 500) return new UnknownOutcomeError("mcp.dropped", words, { cause: error });
    return new PermanentError("mcp.refused", words, { details: { status } });
  }
}

/** How long the server is asked to keep a task and its result: a day. */
const TASK_TTL_MS = 24 * 3600 * 1000;

function callParams(call: McpCall) {
  return {
    name: call.name,
    arguments: { ...call.arguments },
    ...(call.meta ? { _meta: { ...call.meta } } : {}),
  };
}

function callResult(result: {
  isError?: boolean;
  content: McpCallResult["content"];
  structuredContent?: Record<string, unknown>;
}): McpCallResult {
  return {
    isError: result.isError === true,
    content: result.content,
    ...(result.structuredContent ? { structuredContent: result.structuredContent } : {}),
  };
}

function taskOf(task: {
  taskId: string;
  status: McpTask["status"];
  pollInterval?: number;
  statusMessage?: string;
}): McpTask {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.pollInterval === undefined ? {} : { pollIntervalMs: task.pollInterval }),
    ...(task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage }),
  };
}
