import type { EventType as AguiEventType, BaseEvent } from "@ag-ui/core";

/**
 * The AG-UI wire as the streams write it, without AG-UI's packages at run time: `@ag-ui/core`'s
 * module builds every event's zod schema when it is imported (zod's full build, about 450 KB of
 * the stream function's bundle) and `@ag-ui/encoder` brings `@ag-ui/proto` for a protobuf
 * encoding these streams never send. The streams need the event types' names and the SSE
 * encoding only; the types still come from `@ag-ui/core` (type imports, gone from the bundle),
 * and test/front-door/agui.test.ts checks both against the packages.
 */

/** The AG-UI event types the streams send: `@ag-ui/core`'s `EventType` values, by name. */
export const EventType = {
  RUN_STARTED: "RUN_STARTED" as AguiEventType.RUN_STARTED,
  RUN_FINISHED: "RUN_FINISHED" as AguiEventType.RUN_FINISHED,
  RUN_ERROR: "RUN_ERROR" as AguiEventType.RUN_ERROR,
  STEP_STARTED: "STEP_STARTED" as AguiEventType.STEP_STARTED,
  STEP_FINISHED: "STEP_FINISHED" as AguiEventType.STEP_FINISHED,
  STATE_DELTA: "STATE_DELTA" as AguiEventType.STATE_DELTA,
  TEXT_MESSAGE_START: "TEXT_MESSAGE_START" as AguiEventType.TEXT_MESSAGE_START,
  TEXT_MESSAGE_CONTENT: "TEXT_MESSAGE_CONTENT" as AguiEventType.TEXT_MESSAGE_CONTENT,
  TEXT_MESSAGE_END: "TEXT_MESSAGE_END" as AguiEventType.TEXT_MESSAGE_END,
  TOOL_CALL_START: "TOOL_CALL_START" as AguiEventType.TOOL_CALL_START,
  TOOL_CALL_ARGS: "TOOL_CALL_ARGS" as AguiEventType.TOOL_CALL_ARGS,
  TOOL_CALL_END: "TOOL_CALL_END" as AguiEventType.TOOL_CALL_END,
  TOOL_CALL_RESULT: "TOOL_CALL_RESULT" as AguiEventType.TOOL_CALL_RESULT,
} as const;

/**
 * One event as a server-sent message's `data:` line and its blank line: the event's JSON, as
 * `@ag-ui/encoder`'s `encodeSSE` writes it. (That encoder also leaves out an optional field set
 * to `null`; no event these streams make has one.)
 */
export function encodeSse(event: BaseEvent): string {
  return `data: ${JSON.stringify(event)}\n\n`;
}
