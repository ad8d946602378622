import { PermanentError, TransientError, UnknownOutcomeError } from "../../core/errors";
import type { JsonSchema } from "../../core/model-schemas";
import type { McpCall, McpCallResult, McpListedTool, McpServerPort, McpTask } from "./port";

/**
 * The MCP integration's twin: a server in memory with the port's error contract (./port.ts). Its
 * tools are the test's: each answers a call (and may honour the idempotency key in `meta`). It
 * keeps every call that reached it, and fails the next calls as told (`failNext`): unavailable
 * (nothing reached it), a timeout before or after the tool ran, a dropped connection after it ran.
 * A tool marked `task` is listed task-required; its task runs at once and is `completed` (or
 * `failed`, with its result, when the tool answers `isError`) by the time the call answers, or,
 * with `workingPolls`, once that many `tasks/get` have found it `working`.
 */

export interface MemoryMcpTool {
  readonly description?: string;
  readonly inputSchema: JsonSchema;
  /** Listed `taskSupport: "required"`: called as a task. */
  readonly task?: boolean;
  /** For a `task`: how many `tasks/get` find its task `working` before it ends. @default 0 */
  readonly workingPolls?: number;
  run(
    args: Readonly<Record<string, unknown>>,
    meta: Readonly<Record<string, unknown>>,
  ): McpCallResult | Promise<McpCallResult>;
}

export type McpFault = "unavailable" | "timeout before running" | "timeout after running";

export class InMemoryMcpServer implements McpServerPort {
  /** Every `tools/call` that reached the server, in order. */
  readonly calls: McpCall[] = [];
  private readonly tools = new Map<string, MemoryMcpTool>();
  private readonly faults: McpFault[] = [];
  private readonly tasks = new Map<
    string,
    { task: McpTask; result: McpCallResult; workingPolls: number }
  >();

  constructor(tools: Readonly<Record<string, MemoryMcpTool>> = {}) {
    for (const [name, tool] of Object.entries(tools)) this.tools.set(name, tool);
  }

  /** Adds (or replaces) a tool. */
  define(name: string, tool: MemoryMcpTool): this {
    this.tools.set(name, tool);
    return this;
  }

  /** The next calls fail as said, one fault each. */
  failNext(...faults: McpFault[]): void {
    this.faults.push(...faults);
  }

  async listTools(): Promise<readonly McpListedTool[]> {
    return [...this.tools].map(([name, { description, inputSchema, task }]) => ({
      name,
      ...(description === undefined ? {} : { description }),
      inputSchema,
      ...(task ? { taskSupport: "required" as const } : {}),
    }));
  }

  async callTool(call: McpCall): Promise<McpCallResult> {
    const fault = this.faults.shift();
    if (fault === "unavailable")
      throw new TransientError("mcp.unavailable", `${call.name}: the server is unavailable`);
    if (fault === "timeout before running")
      throw new UnknownOutcomeError("mcp.timeout", `${call.name}: no answer in time`);
    this.calls.push(call);
    const tool = this.tools.get(call.name);
    if (!tool)
      throw new PermanentError(
        "mcp.protocol_error",
        `${call.name}: MCP error -32602: unknown tool`,
      );
    const result = await tool.run(call.arguments, call.meta ?? {});
    if (fault === "timeout after running")
      throw new UnknownOutcomeError("mcp.timeout", `${call.name}: no answer in time`);
    return result;
  }

  async startTask(call: McpCall): Promise<McpTask> {
    const result = await this.callTool(call);
    const workingPolls = this.tools.get(call.name)?.workingPolls ?? 0;
    const task: McpTask = {
      taskId: `task-${this.tasks.size + 1}`,
      status: result.isError ? "failed" : "completed",
    };
    this.tasks.set(task.taskId, { task, result, workingPolls });
    return workingPolls > 0 ? { ...task, status: "working" } : task;
  }

  async getTask(taskId: string): Promise<McpTask> {
    const found = this.taskOf(taskId);
    if (found.workingPolls <= 0) return found.task;
    found.workingPolls -= 1;
    return { ...found.task, status: "working" };
  }

  async taskResult(taskId: string): Promise<McpCallResult> {
    return this.taskOf(taskId).result;
  }

  private taskOf(taskId: string) {
    const found = this.tasks.get(taskId);
    if (!found)
      throw new PermanentError("mcp.protocol_error", `MCP error -32602: Task not found: ${taskId}`);
    return found;
  }
}
