import * as z from "../../../schemas/zod";
import { type AgentBusError, PermanentError, TransientError, UnknownOutcomeError } from "../errors";
import type { SideEffectStore } from "../side-effects";
import { type LearntBy, type ResumableWrite, type StillGoingOn, writeOnce } from "../write-once";
import type { AnyTool, PendingCall } from "./agent";
import type { ToolCallContext } from "./tool";

/**
 * One tool call, run at most once in effect (seed 000 §3.2, §11.4):
 *
 * - A read tool runs; its output goes back to the model. A refusal (PermanentError) goes back as
 *   an error the model can read; anything else is retried with the delivery (read tools may be).
 * - A write tool is an outside write run once under the key `<task_id>:<agent run>:<turn>:<tool
 *   call id>` (toolCallKey) by `writeOnce` (../write-once.ts, whose contract this is, as the
 *   sender's sends are):
 *   claimed `pending` before the call, then recorded `succeeded` (its output kept with the
 *   record), `failed` (refused: the model is told), or `unknown`. A final record answers without
 *   a call; an earlier attempt's record, or a timeout, is asked about by `query(key)`, or, for a
 *   tool without one, by a call again under the same key on the next attempt (such a tool must
 *   never apply a key twice). An outcome still unknown throws TransientError
 *   `tool.outcome_unknown` (the queue redelivers, the next attempt asks again) until
 *   `maxUnknownAttempts`, then the run is handed to a person: never retried under a new key.
 *   The step says how it was learnt: `run`, `retry`, `query`, `query after timeout`, `record`,
 *   `poll`.
 * - A write tool the outside system runs long (`resume`: an MCP task) keeps the work's id with the
 *   ledger's record as soon as the system gives it (`ToolCallContext.started`); work still going
 *   on at the call's timeout is `working` (the run waits for it: ./task-wait.ts), and every later
 *   attempt polls it by `resume`, never calls again.
 */

export const OUTCOME_UNKNOWN = "tool.outcome_unknown";

export type CallOutcome =
  | { readonly kind: "succeeded"; readonly output: unknown; readonly by: string }
  | { readonly kind: "failed"; readonly code: string; readonly message: string }
  | { readonly kind: "unknown"; readonly key: string; readonly message: string }
  | (StillGoingOn & { readonly key: string });

export interface ToolCallRun {
  readonly tool: AnyTool;
  readonly input: unknown;
  readonly context: ToolCallContext;
  /** The delivery's receive count: an unknown outcome counts the larger of it and the record's. */
  readonly receiveCount: number;
  readonly maxUnknownAttempts: number;
}

/**
 * The idempotency key of a tool call: `<task_id>:<agent run>:<turn>:<tool call id>`. The id is the
 * model's, unique only within its turn: a model may number each turn's calls from 1 again, and
 * under `<task_id>:<agent run>:<id>` alone a second turn's write would find the first's record
 * and answer with its outcome, never run. A call taken before calls kept their turn
 * (`PendingCall.turn` absent) keeps the key it was claimed under, without the turn.
 */
export function toolCallKey(
  taskId: string,
  runId: string,
  call: Pick<PendingCall, "id" | "turn">,
): string {
  return call.turn === undefined
    ? `${taskId}:${runId}:${call.id}`
    : `${taskId}:${runId}:${call.turn}:${call.id}`;
}

/** Run one call of a read tool. */
export async function runReadTool(call: ToolCallRun): Promise<CallOutcome> {
  try {
    const output = checkedOutput(call.tool, await call.tool.run(call.input, call.context));
    return { kind: "succeeded", output, by: "run" };
  } catch (error) {
    if (isRefusal(error)) return { kind: "failed", code: error.code, message: error.message };
    if (error instanceof UnknownOutcomeError)
      throw new TransientError("tool.read_retry", `${call.tool.name}: ${error.message}`, {
        cause: error,
      });
    throw error;
  }
}

/** Run one call of a write tool once under its key (see the file's comment). */
export async function runWriteTool(
  call: ToolCallRun,
  sideEffects: SideEffectStore,
): Promise<CallOutcome> {
  const { key, taskId, now } = call.context;
  const outcome = await writeOnce({
    ...toolWrite(call),
    ledger: sideEffects,
    key,
    taskId,
    kind: call.tool.name,
    now,
    receiveCount: call.receiveCount,
    maxUnknownAttempts: call.maxUnknownAttempts,
    unknownCode: OUTCOME_UNKNOWN,
    ...(call.tool.waitLimitSeconds === undefined
      ? {}
      : { workingLimitSeconds: call.tool.waitLimitSeconds }),
  });
  switch (outcome.kind) {
    case "succeeded":
      return { kind: "succeeded", output: outcome.output, by: RUN_BY[outcome.by] };
    case "failed":
      return { kind: "failed", ...outcome.error };
    case "working":
      return { ...outcome, key };
    default:
      return { kind: "unknown", key, message: outcome.error.message };
  }
}

/**
 * A write tool as an outside write: `run` and `query` under the call's key, each output checked
 * against the tool's schema (a tool that answers out of shape is a bug, not a refusal). A tool
 * without `query` is called again under the same key to learn what happened (it must never
 * apply a key twice), unless it says a resend is not safe (`resendSafe: false`): then an outcome
 * still unknown goes to a person.
 */
function toolWrite({ tool, input, context }: ToolCallRun): ResumableWrite<unknown> {
  const checked = (output: unknown) => checkedOutput(tool, output);
  const query = tool.query?.bind(tool);
  const resume = tool.resume?.bind(tool);
  return {
    name: tool.name,
    call: async (started) =>
      checked(await tool.run(input, started ? { ...context, started } : context)),
    ...(resume && {
      resume: async (operation: string) => checked(await resume(operation, input, context)),
    }),
    ...(query && {
      async query() {
        const answer = await query(input, context);
        return answer.status === "applied" ? { ...answer, output: checked(answer.output) } : answer;
      },
    }),
    resendSafeWithinSeconds: (tool.resendSafe ?? !query) ? Number.POSITIVE_INFINITY : undefined,
    refusal: (error) =>
      isRefusal(error) ? { code: error.code, message: error.message } : undefined,
    recorded: {
      write: (output) => ({ output_json: JSON.stringify(output) }),
      read: (result) =>
        checked(result?.output_json === undefined ? null : JSON.parse(result.output_json)),
    },
  };
}

/** How a tool call's step says its outcome was learnt. */
const RUN_BY: Readonly<Record<LearntBy, string>> = {
  call: "run",
  retry: "retry",
  query: "query",
  "query after timeout": "query after timeout",
  record: "record",
  poll: "poll",
};

/** The output, checked against the tool's schema: a tool that answers out of shape is a bug. */
function checkedOutput(tool: AnyTool, output: unknown): unknown {
  const parsed = tool.output.safeParse(output);
  if (parsed.success) return parsed.data;
  const issues = z.issueLines(parsed.error, "(output)");
  throw new PermanentError(
    "tool.invalid_output",
    `tool ${tool.name} answered outside its output schema: ${issues.join("; ")}`,
    { details: { tool: tool.name, issues } },
  );
}

/** A refusal of the outside system (a PermanentError other than an output out of shape). */
function isRefusal(error: unknown): error is AgentBusError {
  return error instanceof PermanentError && error.code !== "tool.invalid_output";
}
