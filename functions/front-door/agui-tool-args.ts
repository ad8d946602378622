import type { BaseEvent } from "@ag-ui/core";
import type { Envelope } from "../../schemas";
import { CONTENT_MISSING, type ContentStore } from "../core/agent/content";
import { PermanentError } from "../core/errors";
import { cutText, shownPayload } from "./agui-shown";
import { EventType } from "./agui-wire";

/**
 * An agent's tool calls on an AG-UI stream: what is read of each (its input, `TOOL_CALL_ARGS`,
 * and its output, `TOOL_CALL_RESULT`) and the events it is sent as. An agent's tool call is
 * recorded in its run's stream as its next step command, which names the model turn that asked
 * for it (`done.turn_ref`: the turn holds the call's input) and the answer the model was given
 * on its next turn (`done.result_ref`: the tool's output, or the error the model was told), both
 * texts of the content store (functions/core/agent/content.ts).
 *
 * Each poll reads the texts the facts it read name, each text once, TEXTS_PER_READ texts in one
 * read (a BatchGetItem on the state table: keys `content#<ref>`, as the stream function's policy
 * allows). A stream reads a fact once per connection (after the position it resumes from), so it
 * reads a text once per connection and per poll that read one of its calls, never once per poll
 * nor once per event: a connection costs one content read per model turn and per call answer it
 * sends, ceil(text size / 4 KB) read units each (a turn is at most MAX_TURN_BYTES, an answer at
 * most MAX_CONTENT_BYTES).
 *
 * What is shown is what the model was given, never more: the stored texts as they are (a run's
 * texts are stored plain and written `[erased]` in place when its customer is erased), every
 * sealed value shown `[sealed]` (./agui-shown.ts). An output is cut at RESULT_CONTENT_LIMIT
 * characters, so a message stays small.
 *
 * A text no longer stored (`content.missing`) gives its call ARGS_UNAVAILABLE or
 * `resultUnavailable`, and the stream goes on; any other failure of the read is the poll's, as a
 * failed read of a stream is (the client reconnects and resumes).
 */

/** The most texts read in one content read (a DynamoDB BatchGetItem's most keys). */
export const TEXTS_PER_READ = 100;

/** The most characters of a call's output a `TOOL_CALL_RESULT` carries, then `cutText`'s marker. */
export const RESULT_CONTENT_LIMIT = 4000;

/**
 * The `TOOL_CALL_ARGS` delta of a call whose input cannot be read (its turn is no longer in the
 * content store, or does not hold the call): JSON `null`, which no tool's input is (a tool's
 * input is an object).
 */
export const ARGS_UNAVAILABLE = "null";

/** Where a call's output would be, in its `TOOL_CALL_RESULT` content, when it cannot be read. */
export const RESULT_UNAVAILABLE = "[no longer stored]";

/**
 * What was read of an agent's tool call, as sent: its input (the `TOOL_CALL_ARGS` delta) and its
 * output (the `TOOL_CALL_RESULT` content). Absent: not read (no content store, or gone).
 */
export interface ToolCallRead {
  readonly args?: string;
  readonly result?: string;
}

/**
 * Each tool call's read, by the event id of the fact that records it, for the facts of `facts`
 * that are agents' tool calls naming their texts. Without a content store: none. At most
 * TEXTS_PER_READ texts are held at once.
 */
export async function toolCallReadsOf(
  content: Pick<ContentStore, "getMany"> | undefined,
  facts: readonly Envelope[],
): Promise<ReadonlyMap<string, ToolCallRead>> {
  const calls = facts.flatMap((fact) => {
    const call = toolCallRefs(fact);
    return call ? [{ ...call, eventId: fact.event_id }] : [];
  });
  const refs = [...new Set(calls.flatMap((c) => [c.turnRef ?? [], c.resultRef ?? []].flat()))];
  const reads = new Map<string, ToolCallRead>();
  for (let start = 0; start < refs.length && content; start += TEXTS_PER_READ) {
    const texts = await storedTexts(content, refs.slice(start, start + TEXTS_PER_READ));
    for (const call of calls) {
      const read = { ...reads.get(call.eventId) };
      if (call.turnRef !== undefined && texts.has(call.turnRef))
        read.args = toolCallArgs(texts.get(call.turnRef), call.callId);
      if (call.resultRef !== undefined && texts.has(call.resultRef))
        read.result = toolCallResult(texts.get(call.resultRef));
      reads.set(call.eventId, read);
    }
  }
  return reads;
}

/**
 * The `TOOL_CALL_START`, `_ARGS`, `_END` and `_RESULT` of the tool call a step command records
 * (none for any other fact). `TOOL_CALL_ARGS` is the call's input (`read.args`, ARGS_UNAVAILABLE
 * when it could not be read); the result's content its output (`read.result`, or
 * `resultUnavailable`). A step command stored before `turn_ref` has no `TOOL_CALL_ARGS`, and one
 * stored before `result_ref` has its outcome as content (`{"outcome": ...}`): what a fact's
 * events are depends on the fact alone, never on a read, so they are as many on every read and
 * a position inside them means the same on every read.
 */
export function agentToolCall(event: Envelope, read: ToolCallRead = {}): BaseEvent[] {
  const done = doneOf(event);
  if (done?.kind !== "tool" || typeof done.tool !== "string") return [];
  if (typeof done.tool_call_id !== "string") return [];
  const toolCallId = `${event.aggregate.id}:${done.tool_call_id}`;
  const delta = typeof done.turn_ref === "string" ? (read.args ?? ARGS_UNAVAILABLE) : undefined;
  const content =
    typeof done.result_ref === "string"
      ? (read.result ?? resultUnavailable(done.outcome))
      : JSON.stringify({ outcome: done.outcome ?? null });
  return [
    { type: EventType.TOOL_CALL_START, toolCallId, toolCallName: done.tool },
    ...(delta === undefined ? [] : [{ type: EventType.TOOL_CALL_ARGS, toolCallId, delta }]),
    { type: EventType.TOOL_CALL_END, toolCallId },
    {
      type: EventType.TOOL_CALL_RESULT,
      messageId: `${toolCallId}:result`,
      toolCallId,
      content,
      role: "tool",
    },
  ] as BaseEvent[];
}

/**
 * The call an agent's tool step names, the turn its input is in and its answer (each when the
 * step names it); undefined for any other fact, or a step naming neither.
 */
export function toolCallRefs(
  event: Envelope,
): { callId: string; turnRef?: string; resultRef?: string } | undefined {
  const done = doneOf(event);
  if (done?.kind !== "tool" || typeof done.tool_call_id !== "string") return undefined;
  const { turn_ref: turnRef, result_ref: resultRef } = done;
  if (typeof turnRef !== "string" && typeof resultRef !== "string") return undefined;
  return {
    callId: done.tool_call_id,
    ...(typeof turnRef === "string" ? { turnRef } : {}),
    ...(typeof resultRef === "string" ? { resultRef } : {}),
  };
}

/**
 * The `TOOL_CALL_ARGS` delta of call `callId`: its input in the stored turn `turnText` (a model
 * message, functions/core/model.ts), as JSON, shown (./agui-shown.ts); ARGS_UNAVAILABLE when the
 * turn was not read or does not hold the call.
 */
export function toolCallArgs(turnText: string | undefined, callId: string): string {
  const calls = (parsed(turnText) as { toolCalls?: unknown } | null | undefined)?.toolCalls;
  const call = Array.isArray(calls)
    ? (calls as Payload[]).find((c) => c !== null && typeof c === "object" && c.id === callId)
    : undefined;
  return call && "input" in call ? JSON.stringify(shownPayload(call.input)) : ARGS_UNAVAILABLE;
}

/**
 * The `TOOL_CALL_RESULT` content of a call whose answer was read: the answer as its model was
 * given it (JSON: the tool's output, or `{"error", "message"}` as the model was told a failure),
 * shown (./agui-shown.ts), cut at RESULT_CONTENT_LIMIT characters. Undefined when it was not read,
 * or is not JSON (no answer is stored so).
 */
export function toolCallResult(answerText: string | undefined): string | undefined {
  const answer = parsed(answerText);
  if (answer === undefined) return undefined;
  return cutText(JSON.stringify(shownPayload(answer)), RESULT_CONTENT_LIMIT);
}

/**
 * The `TOOL_CALL_RESULT` content of a call whose answer cannot be read (no longer in the content
 * store): its outcome, and RESULT_UNAVAILABLE where the output would be.
 */
export function resultUnavailable(outcome: unknown): string {
  return JSON.stringify({ outcome: outcome ?? null, output: RESULT_UNAVAILABLE });
}

type Payload = Readonly<Record<string, unknown>>;

/** An agent's step command's `done`; undefined for any other fact. */
function doneOf(event: Envelope): Payload | undefined {
  if (!event.event_type.endsWith(".step.requested")) return undefined;
  const done = (event.payload as { done?: unknown } | null | undefined)?.done;
  return typeof done === "object" && done !== null ? (done as Payload) : undefined;
}

/** A JSON text's value; undefined for none, or a text that is not JSON. */
function parsed(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The texts of `refs`, undefined for one no longer stored: one read, or, when one of them is
 * missing, one read each (so a text gone costs its neighbours nothing but a read).
 */
async function storedTexts(
  content: Pick<ContentStore, "getMany">,
  refs: readonly string[],
): Promise<Map<string, string | undefined>> {
  try {
    const texts = await content.getMany(refs);
    return new Map(refs.map((ref, index) => [ref, texts[index]]));
  } catch (error) {
    if (!isMissing(error)) throw error;
  }
  const texts = new Map<string, string | undefined>();
  for (const ref of refs)
    texts.set(
      ref,
      await content.getMany([ref]).then(
        ([text]) => text,
        (error: unknown) => {
          if (isMissing(error)) return undefined;
          throw error;
        },
      ),
    );
  return texts;
}

function isMissing(error: unknown): boolean {
  return error instanceof PermanentError && error.code === CONTENT_MISSING;
}
