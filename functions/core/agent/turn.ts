import {
  MAX_TOOL_CALL_ID,
  MAX_TOOL_CALLS_PER_TURN,
  MAX_TOOL_NAME,
} from "../../../schemas/events/agent-loop";
import type { ModelMessage, ModelResponse, ModelToolCall } from "../model";

/**
 * What of a model's turn a run takes (./loop.ts). The model's answer is untrusted input and every
 * step must commit whatever it is, so a turn is taken whole or not at all. It is not taken when
 * it asks for more than MAX_TOOL_CALLS_PER_TURN tool calls; when a call's name or id is not a
 * string of 1 to MAX_TOOL_NAME or MAX_TOOL_CALL_ID characters (what the step command and a
 * person's decision carry), or an id repeats another of the turn (the id makes the call's
 * idempotency key); or when the turn is not JSON data or is larger than MAX_TURN_BYTES as JSON
 * (the run stores it: its item and its content stay far within DynamoDB's 400 KB). The run then
 * keeps a note in its place, so the conversation the model is sent stays well formed, and tells
 * the model what was wrong (an error turn).
 */

export const MAX_TURN_BYTES = 100_000;

/** What the conversation keeps of a turn that was not taken. */
export const NOT_TAKEN_NOTE = "(a turn that was not taken)";

export type Turn =
  | {
      readonly taken: true;
      readonly text: string;
      readonly calls: readonly ModelToolCall[];
      /** The assistant message as stored (JSON). */
      readonly stored: string;
    }
  | {
      readonly taken: false;
      /** What was wrong, addressed to the model. */
      readonly problem: string;
      /** How many tool calls it asked for. */
      readonly asked: number;
      readonly stored: string;
    };

export function takenTurn(response: ModelResponse): Turn {
  const calls: unknown = response.toolCalls ?? [];
  const asked = Array.isArray(calls) ? calls.length : 0;
  const problem =
    callsProblem(calls) ??
    (typeof response.text === "string" ? undefined : "its text is not a string.");
  const notTaken = (why: string): Turn => ({
    taken: false,
    problem: `${why} Nothing was run.`,
    asked,
    stored: JSON.stringify({ role: "assistant", text: NOT_TAKEN_NOTE } satisfies ModelMessage),
  });
  if (problem) return notTaken(problem);
  const toolCalls = calls as ModelToolCall[];
  const message: ModelMessage = {
    role: "assistant",
    text: response.text,
    ...(toolCalls.length ? { toolCalls } : {}),
  };
  let stored: string;
  try {
    stored = JSON.stringify(message);
  } catch {
    return notTaken("it is not JSON data.");
  }
  const bytes = Buffer.byteLength(stored, "utf8");
  if (bytes > MAX_TURN_BYTES)
    return notTaken(`it is ${bytes} bytes as JSON; at most ${MAX_TURN_BYTES} are taken.`);
  return { taken: true, text: response.text, calls: toolCalls, stored };
}

function callsProblem(calls: unknown): string | undefined {
  if (!Array.isArray(calls)) return "its tool calls are not a list.";
  if (calls.length > MAX_TOOL_CALLS_PER_TURN)
    return `it asked for ${calls.length} tool calls; at most ${MAX_TOOL_CALLS_PER_TURN} are taken in one turn: ask for fewer at a time.`;
  const ids = new Set<string>();
  for (const call of calls as Partial<ModelToolCall>[]) {
    const { id, name } = call ?? {};
    if (!lengthWithin(name, MAX_TOOL_NAME))
      return `a tool name must be 1 to ${MAX_TOOL_NAME} characters${lengthOf(name)}.`;
    if (!lengthWithin(id, MAX_TOOL_CALL_ID))
      return `a tool call id must be 1 to ${MAX_TOOL_CALL_ID} characters${lengthOf(id)}.`;
    if (ids.has(id))
      return `the ids of a turn's tool calls must be distinct; ${id} is given twice.`;
    ids.add(id);
  }
  return undefined;
}

function lengthWithin(value: unknown, max: number): value is string {
  return typeof value === "string" && value.length >= 1 && value.length <= max;
}

function lengthOf(value: unknown): string {
  return typeof value === "string" ? ` (one is ${value.length})` : " (one is not a string)";
}

/** A count a model port reported, as a step records it: a non-negative integer, else 0. */
export function reportedCount(value: unknown): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/** A latency a model port reported: a finite non-negative number of milliseconds, else 0. */
export function reportedLatency(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : 0;
}
