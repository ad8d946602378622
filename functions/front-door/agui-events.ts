import type { BaseEvent } from "@ag-ui/core";
import type { Envelope } from "../../schemas";
import { shownPayload, shownText } from "./agui-shown";
import { agentToolCall, type ToolCallRead } from "./agui-tool-args";
import { EventType } from "./agui-wire";

/**
 * Stored facts as AG-UI events (https://docs.ag-ui.com), a pure function of each fact: the same
 * fact always maps to the same events, so a position inside them (./agui-position.ts) means the
 * same on every read.
 *
 * Each stored fact is the record of one decision of one role (the router's, the order lookup's,
 * the reply generator's, the sender's; the orchestrator's), so each is one AG-UI run on the
 * thread: `RUN_STARTED` (`runId` = the fact's event id; `metadata.agentbus` names its type, its
 * turn's `task_id` and the role that produced it), what the fact says, then `RUN_FINISHED`. A
 * fact that says nothing to a client (a command between roles, a heartbeat) maps to no events.
 *
 * A conversation's facts:
 *
 * | fact                                     | AG-UI                                                         |
 * | ---------------------------------------- | ------------------------------------------------------------- |
 * | `conversation.message.accepted`          | a `user` text message (the customer's words)                  |
 * | `order.lookup.completed`                 | a tool call `order_lookup` (args: the order id) and its result |
 * | `reply.generated`, `reply.approved`      | an `assistant` text message (the reply)                       |
 * | `reply.held_for_review`                  | the run finishes with an `interrupt` outcome: a person decides |
 * | `support.cancelled`                      | the run finishes `cancelled`                                  |
 * | each of those and `support.routed`, `reply.rejected`, `notification.*`, `support.step.failed`, `support.superseded` | a `STATE_DELTA` on `/<task_id>`: the turn's status and fields |
 * | the refund agent's step after a tool call | a tool call named by the tool: its input, and the output its model was given (./agui-tool-args.ts) |
 *
 * The state is an object with one member per turn (its task id), as `GET /v1/conversations/{id}`
 * shows each turn. A held reply's text is not shown before a person released it, as the GET
 * route hides it. A personal field still sealed (the function holds no customer key, or the
 * key was erased) is shown `[sealed]`, never as its ciphertext.
 *
 * A run's facts (stream `dag_run/<run_id>`): each command to a step role is a tool call named
 * by its type (args: its payload), and the run's end (`workflow.completed`, `.partial`,
 * `.failed`, `.rejected`) a `STATE_DELTA` of `/status` with the run's `RUN_FINISHED` carrying the
 * outcome as its `result` (a refusal's with `error`, its code and message). Each assignment's
 * stream (the step role's or the agent's where it answers: ./agui-run.ts) gives the node's answer
 * and its agent's tool calls (`nodeFactEvents`).
 */

/** Whose thread the events are on: the client's own id of the conversation, or the run id. */
export interface Thread {
  readonly threadId: string;
}

type Payload = Readonly<Record<string, unknown>>;
type Body = (event: Envelope, payload: Payload) => BaseEvent[];

/** The turn's fields each conversation fact sets (its STATE_DELTA), as the view folds them. */
const TURN_FIELDS: Readonly<Record<string, (p: Payload) => Record<string, unknown>>> = {
  "conversation.message.accepted": (p) => ({ status: "received", input_version: p.version }),
  "support.routed": (p) => ({ status: "routed", intent: p.intent, order_id: p.order_id }),
  "order.lookup.completed": (p) => ({ status: "looked_up", order_found: p.found }),
  "reply.generated": () => ({ status: "generated" }),
  "reply.held_for_review": () => ({ status: "held_for_review" }),
  "reply.approved": (p) => ({ status: "approved", reviewed_by: p.requested_by }),
  "reply.rejected": (p) => ({ status: "rejected", reviewed_by: p.requested_by }),
  "notification.delivered": (p) => ({ status: "delivered", delivery_id: p.delivery_id }),
  "notification.failed": (p) => ({ status: "failed", delivery_code: p.code }),
  "support.step.failed": (p) => ({
    status: "failed",
    step_failure: { step: p.step, code: p.code },
  }),
  "support.cancelled": (p) => ({ status: "cancelled", cancelled_by: p.requested_by }),
  "support.superseded": (p) => ({ status: "superseded", superseded_by: p.superseded_by }),
};

/** What a conversation fact says besides its turn's fields, between RUN_STARTED and its end. */
const CONVERSATION_BODIES: Readonly<Record<string, Body>> = {
  "conversation.message.accepted": (e, p) => textMessage(e.event_id, "user", p.text),
  "order.lookup.completed": (e, p) =>
    toolCall(e.event_id, "order_lookup", { order_id: p.order_id }, { found: p.found }),
  "reply.generated": (e, p) => textMessage(e.event_id, "assistant", p.reply_text),
  "reply.approved": (e, p) => textMessage(e.event_id, "assistant", p.reply_text),
};

/** The AG-UI events of one fact of a conversation (none for a fact a client is not shown). */
export function conversationFactEvents(
  thread: Thread,
  event: Envelope,
  read?: ToolCallRead,
): BaseEvent[] {
  const fields = TURN_FIELDS[event.event_type];
  if (!fields) return agentToolCallEvents(thread, event, read);
  const payload = payloadOf(event);
  const body = CONVERSATION_BODIES[event.event_type]?.(event, payload) ?? [];
  const delta: BaseEvent = {
    type: EventType.STATE_DELTA,
    delta: turnPatch(event.task_id, event.event_type, fields(payload)),
  } as BaseEvent;
  return [runStarted(thread, event), ...body, delta, conversationEnd(thread, event)];
}

/**
 * The AG-UI events of one fact of a run's stream; `opensNodes` for the command of the run's first
 * assignment, whose events create the state's `/nodes` (so each answer's delta applies).
 */
export function runFactEvents(thread: Thread, event: Envelope, opensNodes = false): BaseEvent[] {
  const payload = payloadOf(event);
  // A refusal ends the run only when it refused the start: a refused confirm, cancel or re-run
  // of a running run leaves it running.
  const refusedOther = event.event_type === "workflow.rejected" && payload.request !== "start";
  const ended = refusedOther ? undefined : RUN_ENDS[event.event_type];
  if (ended !== undefined) {
    // A refusal says why, as `GET /v1/runs/{id}` shows a refused start: its code and message.
    const why =
      event.event_type === "workflow.rejected"
        ? { error: { code: payload.code, message: payload.message } }
        : { reason: payload.reason };
    return [
      runStarted(thread, event),
      { type: EventType.STATE_DELTA, delta: [{ op: "add", path: "/status", value: ended }] },
      runFinished(thread, event, { result: { status: ended, ...why } }),
    ] as BaseEvent[];
  }
  if (!isStepCommand(event)) return [];
  const nodes = { type: EventType.STATE_DELTA, delta: [{ op: "add", path: "/nodes", value: {} }] };
  return [
    runStarted(thread, event),
    ...(opensNodes ? [nodes as BaseEvent] : []),
    ...toolCall(event.event_id, event.event_type, shownPayload(payload)),
    runFinished(thread, event),
  ];
}

/**
 * Whether a fact of an assignment's stream is its answer (`step.completed`, `<stem>.failed`, ...:
 * it names the node and carries the output or the error). Nothing after it is shown: a role
 * that answers a repeated request again says nothing new.
 */
export function isNodeAnswer(event: Envelope): boolean {
  const payload = payloadOf(event);
  const answer = event.event_type.endsWith(".completed") || event.event_type.endsWith(".failed");
  return (
    answer && typeof payload.node_id === "string" && ("output" in payload || "error" in payload)
  );
}

/**
 * The AG-UI events of one fact of an assignment's stream (a node's, or one item's of a map node):
 * its answer is a step of the run, `STEP_STARTED` and `STEP_FINISHED` named by the node (an
 * item: `<node_id>[<index>]`) around a `STATE_DELTA` that sets `/nodes/<step>` to its state and
 * output (or error); each tool call its agent made is a tool call with its output as the result.
 */
export function nodeFactEvents(thread: Thread, event: Envelope, read?: ToolCallRead): BaseEvent[] {
  if (!isNodeAnswer(event)) return agentToolCallEvents(thread, event, read);
  return [runStarted(thread, event), ...nodeAnswer(payloadOf(event)), runFinished(thread, event)];
}

/**
 * A tool call an agent recorded (a node's agent in a run, the refund agent in a conversation's
 * turn) as an AG-UI run of its own; none for any other fact. `read`: its input and output as read
 * (./agui-tool-args.ts).
 */
function agentToolCallEvents(thread: Thread, event: Envelope, read?: ToolCallRead): BaseEvent[] {
  const body = agentToolCall(event, read);
  return body.length === 0 ? [] : [runStarted(thread, event), ...body, runFinished(thread, event)];
}

function nodeAnswer(payload: Payload): BaseEvent[] {
  const item = typeof payload.item === "number" ? `[${payload.item}]` : "";
  const stepName = `${String(payload.node_id)}${item}`;
  const value =
    "output" in payload
      ? { state: "COMPLETED", output: shownPayload(payload.output) }
      : { state: "FAILED", error: shownPayload(payload.error) };
  const path = `/nodes/${pointerToken(stepName)}`;
  return [
    { type: EventType.STEP_STARTED, stepName },
    { type: EventType.STATE_DELTA, delta: [{ op: "add", path, value }] },
    { type: EventType.STEP_FINISHED, stepName },
  ] as BaseEvent[];
}

const RUN_ENDS: Readonly<Record<string, string>> = {
  "workflow.completed": "COMPLETED",
  "workflow.partial": "PARTIAL",
  "workflow.failed": "FAILED",
  "workflow.rejected": "REJECTED",
};

/** A command the orchestrator sent a step role for a node (its payload names the node). */
function isStepCommand(event: Envelope): boolean {
  return event.event_type.endsWith(".requested") && typeof payloadOf(event).node_id === "string";
}

function runStarted(thread: Thread, event: Envelope): BaseEvent {
  return {
    type: EventType.RUN_STARTED,
    threadId: thread.threadId,
    runId: event.event_id,
    metadata: {
      agentbus: {
        event_type: event.event_type,
        task_id: event.task_id,
        ...(event.producer ? { producer: event.producer } : {}),
        occurred_at: event.occurred_at,
      },
    },
  } as BaseEvent;
}

function runFinished(thread: Thread, event: Envelope, extra: object = {}): BaseEvent {
  return {
    type: EventType.RUN_FINISHED,
    threadId: thread.threadId,
    runId: event.event_id,
    ...extra,
  } as BaseEvent;
}

/** A conversation fact's run end: an interrupt for a held reply, cancelled for a cancel. */
function conversationEnd(thread: Thread, event: Envelope): BaseEvent {
  if (event.event_type === "reply.held_for_review")
    return runFinished(thread, event, {
      outcome: {
        type: "interrupt",
        interrupts: [
          {
            id: `${event.task_id}:review`,
            reason: "held_for_review",
            // Why it was held (an output guard's finding, the model's request) is the operators',
            // as GET /v1/conversations/{id} keeps it (`held_reason`): the client is told only that.
            message: "the reply waits for a person's review",
            metadata: { task_id: event.task_id },
          },
        ],
      },
    });
  if (event.event_type === "support.cancelled")
    return runFinished(thread, event, { outcome: { type: "cancelled" } });
  return runFinished(thread, event);
}

function textMessage(messageId: string, role: "user" | "assistant", text: unknown): BaseEvent[] {
  const shown = shownText(text);
  return [
    { type: EventType.TEXT_MESSAGE_START, messageId, role },
    ...(shown === "" ? [] : [{ type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: shown }]),
    { type: EventType.TEXT_MESSAGE_END, messageId },
  ] as BaseEvent[];
}

function toolCall(toolCallId: string, name: string, args: unknown, result?: unknown): BaseEvent[] {
  return [
    { type: EventType.TOOL_CALL_START, toolCallId, toolCallName: name },
    { type: EventType.TOOL_CALL_ARGS, toolCallId, delta: JSON.stringify(args) },
    { type: EventType.TOOL_CALL_END, toolCallId },
    ...(result === undefined
      ? []
      : [
          {
            type: EventType.TOOL_CALL_RESULT,
            messageId: `${toolCallId}:result`,
            toolCallId,
            content: JSON.stringify(result),
            role: "tool",
          },
        ]),
  ] as BaseEvent[];
}

/** JSON Patch `add` of each defined field of the turn (creating the turn on its first fact). */
function turnPatch(taskId: string, type: string, fields: Record<string, unknown>) {
  const turn = `/${pointerToken(taskId)}`;
  const defined = Object.entries(fields).filter(([, value]) => value !== undefined);
  if (type === "conversation.message.accepted")
    return [{ op: "add", path: turn, value: { task_id: taskId, ...Object.fromEntries(defined) } }];
  return defined.map(([name, value]) => ({ op: "add", path: `${turn}/${name}`, value }));
}

/** RFC 6901: `~` and `/` escaped. */
function pointerToken(text: string): string {
  return text.replaceAll("~", "~0").replaceAll("/", "~1");
}

function payloadOf(event: Envelope): Payload {
  const payload = event.payload;
  return typeof payload === "object" && payload !== null ? (payload as Payload) : {};
}
