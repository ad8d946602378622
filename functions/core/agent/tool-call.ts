import * as z from "../../../schemas/zod";
import { type AgentBusError, PermanentError, TransientError, UnknownOutcomeError } from "../errors";
import type { SideEffectRecord, SideEffectStore } from "../side-effects";
import type { AnyTool } from "./agent";
import type { ToolCallContext, ToolQueryAnswer } from "./tool";

/**
 * One tool call, run at most once in effect (seed 000 §3.2, §11.4), as the sender runs a send:
 *
 * - A read tool runs; its output goes back to the model. A refusal (PermanentError) goes back as
 *   an error the model can read; anything else is retried with the delivery (read tools may be).
 * - A write tool runs under the key `<task_id>:<agent run>:<tool call id>`, claimed in the
 *   side-effects table before the call (`pending`, attempts + 1), then marked `succeeded` (its
 *   output kept with the record), `failed` (refused), or `unknown`. A record already final is
 *   answered from the record, without a call: that is what a redelivery after a crash between the
 *   call and the commit finds. A record from an earlier attempt that is not final (the earlier
 *   worker may have called and died) is first asked about: `query(key)`, or, for a tool without
 *   one, a call again under the same key, which the outside system must not apply twice. A
 *   timeout is resolved the same way. An outcome still unknown throws TransientError
 *   `tool.outcome_unknown` (the queue redelivers, the next attempt asks again) until
 *   `maxUnknownAttempts`, then the run is handed to a person: never retried under a new key.
 */

export const OUTCOME_UNKNOWN = "tool.outcome_unknown";

export type CallOutcome =
  | { readonly kind: "succeeded"; readonly output: unknown; readonly by: string }
  | { readonly kind: "failed"; readonly code: string; readonly message: string }
  | { readonly kind: "unknown"; readonly key: string; readonly message: string };

export interface ToolCallRun {
  readonly tool: AnyTool;
  readonly input: unknown;
  readonly context: ToolCallContext;
  /** The delivery's receive count: an unknown outcome counts the larger of it and the record's. */
  readonly receiveCount: number;
  readonly maxUnknownAttempts: number;
}

/** The idempotency key of a tool call: `<task_id>:<agent run>:<tool call id>`. */
export function toolCallKey(taskId: string, runId: string, toolCallId: string): string {
  return `${taskId}:${runId}:${toolCallId}`;
}

/** Run one call of a read tool. */
export async function runReadTool(call: ToolCallRun): Promise<CallOutcome> {
  try {
    return checkedOutput(call, await call.tool.run(call.input, call.context), "run");
  } catch (error) {
    if (isRefusal(error)) return refused(error);
    if (error instanceof UnknownOutcomeError)
      throw new TransientError("tool.read_retry", `${call.tool.name}: ${error.message}`, {
        cause: error,
      });
    throw error;
  }
}

/** Run one call of a write tool under its key (see the file's comment). */
export async function runWriteTool(
  call: ToolCallRun,
  sideEffects: SideEffectStore,
): Promise<CallOutcome> {
  const { key, taskId, now } = call.context;
  const record = await sideEffects.claim(key, { task_id: taskId, kind: call.tool.name }, now);
  if (record.state === "succeeded") return fromRecord(call, record);
  if (record.state === "failed")
    return {
      kind: "failed",
      code: record.error?.code ?? "tool.rejected",
      message: record.error?.message ?? "",
    };
  const earlier = record.state === "unknown" || record.attempts > 1;
  const outcome = earlier ? await learn(call, "query") : await attempt(call);
  return settle(call, outcome, Math.max(record.attempts, call.receiveCount), sideEffects);
}

/** The outcome of a call that may have happened: by query, or by a call under the same key. */
async function learn(call: ToolCallRun, by: string): Promise<CallOutcome> {
  if (!call.tool.query) return attempt(call, by === "query" ? "retry" : by);
  let answer: ToolQueryAnswer<unknown>;
  try {
    answer = await call.tool.query(call.input, call.context);
  } catch (error) {
    if (error instanceof UnknownOutcomeError) return unknown(call, error.message);
    throw error;
  }
  if (answer.status === "applied") return checkedOutput(call, answer.output, by);
  if (answer.status === "not_applied") return attempt(call, "retry");
  return unknown(call, `${call.tool.name}: the query by key could not tell`);
}

/** Call the tool under its key; a timeout is resolved by a query (never by a second timeout). */
async function attempt(call: ToolCallRun, by = "run"): Promise<CallOutcome> {
  try {
    return checkedOutput(call, await call.tool.run(call.input, call.context), by);
  } catch (error) {
    if (isRefusal(error)) return refused(error);
    if (!(error instanceof UnknownOutcomeError)) throw error;
    if (!call.tool.query || by === "retry") return unknown(call, error.message);
    return learn(call, "query after timeout");
  }
}

async function settle(
  call: ToolCallRun,
  outcome: CallOutcome,
  attempts: number,
  sideEffects: SideEffectStore,
): Promise<CallOutcome> {
  const { key, now } = call.context;
  if (outcome.kind === "succeeded") {
    await sideEffects.markSucceeded(key, { output_json: JSON.stringify(outcome.output) }, now);
    return outcome;
  }
  if (outcome.kind === "failed") {
    await sideEffects.markFailed(key, { code: outcome.code, message: outcome.message }, now);
    return outcome;
  }
  const message = `${outcome.message} (key ${key}, attempt ${attempts} of ${call.maxUnknownAttempts})`;
  await sideEffects.markUnknown(key, { code: OUTCOME_UNKNOWN, message }, now);
  if (attempts >= call.maxUnknownAttempts) return { ...outcome, message };
  throw new TransientError(OUTCOME_UNKNOWN, message, {
    details: { key, attempts, maxUnknownAttempts: call.maxUnknownAttempts },
  });
}

function fromRecord(call: ToolCallRun, record: SideEffectRecord): CallOutcome {
  const json = record.result?.output_json;
  return checkedOutput(call, json === undefined ? null : JSON.parse(json), "record");
}

/** The output, checked against the tool's schema: a tool that answers out of shape is a bug. */
function checkedOutput(call: ToolCallRun, output: unknown, by: string): CallOutcome {
  const parsed = call.tool.output.safeParse(output);
  if (parsed.success) return { kind: "succeeded", output: parsed.data, by };
  const issues = z.issueLines(parsed.error, "(output)");
  throw new PermanentError(
    "tool.invalid_output",
    `tool ${call.tool.name} answered outside its output schema: ${issues.join("; ")}`,
    { details: { tool: call.tool.name, issues } },
  );
}

function isRefusal(error: unknown): error is AgentBusError {
  return error instanceof PermanentError && error.code !== "tool.invalid_output";
}

function refused(error: AgentBusError): CallOutcome {
  return { kind: "failed", code: error.code, message: error.message };
}

function unknown(call: ToolCallRun, message: string): CallOutcome {
  return { kind: "unknown", key: call.context.key, message: `${call.tool.name}: ${message}` };
}
