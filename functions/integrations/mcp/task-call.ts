import { ToolRejectedError } from "../../core/agent/tool";
import { UnknownOutcomeError } from "../../core/errors";
import type { McpCall, McpCallResult, McpServerPort, McpTask } from "./port";

/**
 * A `tools/call` the server runs as a task (the protocol's `tasks`, 2025-11-25): the
 * task-augmented call creates the task, `tasks/get` is asked at the server's `pollInterval` until
 * the task ends, and `tasks/result` gives its result, all within the call's `timeoutMs`.
 *
 * - `completed` -> the result, as a plain call's;
 * - `failed` -> refused (`mcp.task_failed`, with the server's words), `cancelled` -> refused
 *   (`mcp.task_cancelled`), `input_required` -> refused (`mcp.task_input_required`: the task asks
 *   its caller for input, which an agent's call cannot give);
 * - still `working` at the timeout -> UnknownOutcomeError `mcp.task_working`, naming the task: the
 *   task was created and may still complete, so its outcome is unknown, never a call again under a
 *   new key (./tools.ts does not ask a task tool's `query`, which cannot tell a working task).
 */

/** How long to wait between two `tasks/get` when the server names no `pollInterval`. */
export const DEFAULT_TASK_POLL_MS = 1_000;
/** The least wait between two `tasks/get`, whatever the server asks. */
const MIN_TASK_POLL_MS = 50;
/** The least time a `tasks/get` or `tasks/result` is given to answer, near the call's timeout. */
const MIN_READ_MS = 1_000;

export async function callAsTask(server: McpServerPort, call: McpCall): Promise<McpCallResult> {
  const until = Date.now() + call.timeoutMs;
  let task = await server.startTask(call);
  const readMs = () => Math.max(MIN_READ_MS, until - Date.now());
  while (task.status === "working") {
    const left = until - Date.now();
    if (left <= 0)
      throw new UnknownOutcomeError(
        "mcp.task_working",
        `${call.name}: task ${task.taskId} was still working after ${call.timeoutMs} ms`,
        { details: { task_id: task.taskId } },
      );
    const wait = Math.max(MIN_TASK_POLL_MS, task.pollIntervalMs ?? DEFAULT_TASK_POLL_MS);
    await new Promise((done) => setTimeout(done, Math.min(wait, left)));
    task = await server.getTask(task.taskId, readMs());
  }
  if (task.status === "completed") return server.taskResult(task.taskId, readMs());
  throw await refusal(server, call, task, readMs());
}

/** Why a task that ended other than `completed` is refused, in the server's words if it has any. */
async function refusal(
  server: McpServerPort,
  call: McpCall,
  task: McpTask,
  timeoutMs: number,
): Promise<ToolRejectedError> {
  const said = task.status === "failed" ? await failureText(server, task, timeoutMs) : "";
  const words = said || task.statusMessage || "no reason";
  const codes = {
    failed: "mcp.task_failed",
    cancelled: "mcp.task_cancelled",
    input_required: "mcp.task_input_required",
  } as const;
  const code = codes[task.status as keyof typeof codes] ?? "mcp.task_failed";
  return new ToolRejectedError(code, `${call.name}: task ${task.taskId} ${task.status}: ${words}`);
}

/** A failed task's result text (a tool result with `isError`), or nothing. */
async function failureText(server: McpServerPort, task: McpTask, timeoutMs: number) {
  try {
    const result = await server.taskResult(task.taskId, timeoutMs);
    return result.content
      .flatMap((block) => (block.type === "text" ? [String(block.text)] : []))
      .join("\n");
  } catch {
    return "";
  }
}
