import { ToolRejectedError } from "../../core/agent/tool";
import { PermanentError, UnknownOutcomeError } from "../../core/errors";
import { StillWorkingError } from "../../core/write-once";
import type { McpCall, McpCallResult, McpServerPort, McpTask } from "./port";

/**
 * A `tools/call` the server runs as a task (the protocol's `tasks`, 2025-11-25): the
 * task-augmented call creates the task (its id handed to `started` at once, for the ledger's
 * record), `tasks/get` is asked at the server's `pollInterval` until the task ends, and
 * `tasks/result` gives its result, all within the call's `timeoutMs`. A task an earlier call
 * created is asked about once by `resumeTask` (`tasks/get`), never created again.
 *
 * - `completed` -> the result, as a plain call's;
 * - `failed` -> refused (`mcp.task_failed`, with the server's words), `cancelled` -> refused
 *   (`mcp.task_cancelled`), `input_required` -> refused (`mcp.task_input_required`: the task asks
 *   its caller for input, which an agent's call cannot give);
 * - still `working` at the timeout -> StillWorkingError `mcp.task_working`, naming the task and
 *   its `pollInterval`: the run waits for it and polls it (functions/core/agent/task-wait.ts);
 * - a task the server no longer knows when asked again -> UnknownOutcomeError `mcp.task_lost`
 *   (it may have completed before the server forgot it).
 */

/** How long to wait between two `tasks/get` when the server names no `pollInterval`. */
export const DEFAULT_TASK_POLL_MS = 1_000;
/** The least wait between two `tasks/get`, whatever the server asks. */
const MIN_TASK_POLL_MS = 50;
/** The least time a `tasks/get` or `tasks/result` is given to answer, near the call's timeout. */
const MIN_READ_MS = 1_000;

export async function callAsTask(
  server: McpServerPort,
  call: McpCall,
  started?: (taskId: string) => Promise<void>,
): Promise<McpCallResult> {
  const until = Date.now() + call.timeoutMs;
  let task = await server.startTask(call);
  await started?.(task.taskId);
  const readMs = () => Math.max(MIN_READ_MS, until - Date.now());
  while (task.status === "working") {
    const left = until - Date.now();
    if (left <= 0) break;
    const wait = Math.max(MIN_TASK_POLL_MS, task.pollIntervalMs ?? DEFAULT_TASK_POLL_MS);
    await new Promise((done) => setTimeout(done, Math.min(wait, left)));
    task = await server.getTask(task.taskId, readMs());
  }
  return taskOutcome(server, call, task, readMs());
}

/** A task an earlier call created, asked about once (`tasks/get`): as `callAsTask` ends. */
export async function resumeTask(
  server: McpServerPort,
  call: McpCall,
  taskId: string,
): Promise<McpCallResult> {
  let task: McpTask;
  try {
    task = await server.getTask(taskId, call.timeoutMs);
  } catch (error) {
    if (!(error instanceof PermanentError)) throw error;
    throw new UnknownOutcomeError(
      "mcp.task_lost",
      `${call.name}: the server no longer knows task ${taskId} (${error.message})`,
      { cause: error, details: { task_id: taskId } },
    );
  }
  return taskOutcome(server, call, task, call.timeoutMs);
}

/** A task as last seen: its result when completed, its refusal when it ended otherwise. */
async function taskOutcome(
  server: McpServerPort,
  call: McpCall,
  task: McpTask,
  readMs: number,
): Promise<McpCallResult> {
  if (task.status === "working")
    throw new StillWorkingError(
      "mcp.task_working",
      `${call.name}: task ${task.taskId} is still working`,
      {
        operation: task.taskId,
        status: task.status,
        ...(task.pollIntervalMs === undefined ? {} : { pollAfterMs: task.pollIntervalMs }),
      },
    );
  if (task.status === "completed") return server.taskResult(task.taskId, readMs);
  throw await refusal(server, call, task, readMs);
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
