import type { JsonSchema } from "../../core/model-schemas";

/**
 * An MCP server's tools, as a role calls them (the Model Context Protocol, streamable HTTP):
 * `tools/list` and `tools/call`, and for a tool the server runs as a task (the protocol's
 * `tasks`, 2025-11-25) the task-augmented `tools/call`, `tasks/get` and `tasks/result`. The adapter (./sdk-server.ts) speaks it with the
 * official SDK's client; the twin (./memory.ts) is a server in memory with the same error
 * contract, which tests and the simulation use.
 *
 * What `callTool` throws says what may have happened at the server:
 * - TransientError: nothing reached it (connection refused, 429, credentials to read again);
 * - UnknownOutcomeError `mcp.timeout` / `mcp.dropped`: the request may have reached it and been
 *   applied (a timeout, a connection dropped after sending, a 5xx answer);
 * - PermanentError `mcp.protocol_error` / `mcp.refused`: it answered with a JSON-RPC error, or
 *   refused the request (a 4xx other than 401, 408 and 429). Nothing was applied.
 * A result with `isError: true` is the tool's own refusal, returned as a result: the server's
 * answer, not an error of the transport.
 */

/** One tool of the server's listing. */
export interface McpListedTool {
  readonly name: string;
  readonly description?: string;
  readonly inputSchema: JsonSchema;
  /**
   * Whether the server runs a call of it as a task (its listing's `execution.taskSupport`):
   * `required` (only as a task), `optional`, or `forbidden` (the default).
   */
  readonly taskSupport?: "required" | "optional" | "forbidden";
}

/** A task the server runs a `tools/call` as, as `tasks/get` (or the call that made it) tells it. */
export interface McpTask {
  readonly taskId: string;
  readonly status: "working" | "input_required" | "completed" | "failed" | "cancelled";
  /** How long the server asks to wait between two `tasks/get`, in milliseconds. */
  readonly pollIntervalMs?: number;
  readonly statusMessage?: string;
}

/** One `tools/call`. */
export interface McpCall {
  readonly name: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** The request's `_meta` (the idempotency key of a write). */
  readonly meta?: Readonly<Record<string, unknown>>;
  /** How long to wait for the answer before the outcome is unknown. */
  readonly timeoutMs: number;
}

/** A `tools/call` result, as the server gave it. */
export interface McpCallResult {
  readonly isError: boolean;
  /** The content blocks (`{ type: "text", text }`, ...). */
  readonly content: readonly Readonly<Record<string, unknown>>[];
  readonly structuredContent?: Readonly<Record<string, unknown>>;
}

export interface McpServerPort {
  /** Every tool the server lists (all pages of `tools/list`). */
  listTools(): Promise<readonly McpListedTool[]>;
  /** One `tools/call` (see the file's comment for what its errors mean). */
  callTool(call: McpCall): Promise<McpCallResult>;
  /**
   * One task-augmented `tools/call`: the server creates a task and answers with it at once. Its
   * errors mean what `callTool`'s do (a timeout: the task may have been created).
   */
  startTask(call: McpCall): Promise<McpTask>;
  /** `tasks/get`: the task's status now. A read: its errors change nothing at the server. */
  getTask(taskId: string, timeoutMs: number): Promise<McpTask>;
  /** `tasks/result`: the result of a task that completed (or failed with a tool result). */
  taskResult(taskId: string, timeoutMs: number): Promise<McpCallResult>;
}

/** The `_meta` field a write's idempotency key is sent in. */
export const IDEMPOTENCY_KEY_META = "io.agentbus/idempotency-key";
