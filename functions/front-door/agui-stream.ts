import type { BaseEvent } from "@ag-ui/core";
import { type AggregateRef, type Envelope, tenantOf } from "../../schemas";
import { MAX_STREAM_VERSION } from "../../schemas/envelope";
import { CONVERSATION_AGGREGATE } from "../../schemas/events/conversation";
import { tenantConversationId } from "../../schemas/ids";
import { AGENT_RUN_AGGREGATE } from "../core/agent/agent-role";
import type { ContentStore } from "../core/agent/content";
import type { EventStore } from "../core/ports";
import type { ConversationView } from "../roles/customer-support/conversation-projection/conversation-projection";
import { refundRunId } from "../roles/refund-review/ids";
import { conversationFactEvents, type Thread } from "./agui-events";
import {
  advance,
  encodePosition,
  keepKeys,
  type PlacedFact,
  type Position,
  parsePosition,
  pendingAfter,
  START,
} from "./agui-position";
import { toolCallReadsOf } from "./agui-tool-args";
import { EventType, encodeSse } from "./agui-wire";
import { CONVERSATION_VIEW, conversationOf, mayReadConversation } from "./api";
import { fail } from "./http";
import type { Caller } from "./identity";

/**
 * A conversation's or a run's AG-UI stream, served from the event store (the route table is
 * ./stream.ts's; the mapping ./agui-events.ts; the positions ./agui-position.ts).
 *
 * Each SSE message is one AG-UI event (`data:` as `@ag-ui/encoder` writes it: ./agui-wire.ts)
 * with `id:` its position: a client that reconnects with `Last-Event-ID` gets exactly what it has
 * not seen, in the order a fresh read sends it, however long it was away and whatever was
 * deployed meanwhile.
 *
 * What is read, and when:
 * - a conversation: its stream `conversation/<id>` (each accepted message opens a turn) and each
 *   turn's streams (`support_route`, `order_lookup`, `reply`, `delivery` by task id, then its
 *   refund agent's run: `turnStreamsOf`), for the turns its view keeps (the newest 50, as `GET /v1/conversations/{id}` shows). The view is the
 *   signal: one read of it per poll, and only when its revision moved are the streams read, the
 *   conversation's after what was read, and those of the turns that changed (every turn when
 *   the stream opens). Besides, at every poll, the streams of the newest UNDER_WAY_TURNS_READ
 *   turns under way (`underWayFacts`), so a fact a role stored there shows when it is stored,
 *   not when the view's projection has folded it. A fresh read sends the facts by turn (oldest
 *   first), within a turn by stream in that order, within a stream by version.
 * - a run: its stream and its assignments' streams (./agui-run.ts).
 * - either: the model turns that hold the inputs of the agents' tool calls it sends, and the
 *   answers their models were given (their outputs), once per connection (./agui-tool-args.ts).
 */

/** What an AG-UI stream reads. */
export interface AguiPorts {
  readonly store: Pick<EventStore, "load">;
  /** The event store's streams, in version order. */
  readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]>;
  /** Opens the personal fields of `envelopes` (the function's vault); absent: left sealed. */
  open?(envelopes: readonly Envelope[]): Promise<Envelope[]>;
  /**
   * The content store, where agents keep their model turns and their tools' answers (a tool
   * call's TOOL_CALL_ARGS and TOOL_CALL_RESULT, ./agui-tool-args.ts); absent: every call's args
   * are ARGS_UNAVAILABLE and its output unavailable.
   */
  readonly content?: Pick<ContentStore, "getMany">;
}

/** Where a sent event goes, and whether the client is still there. */
export interface AguiSink {
  write(text: string): void;
  closed(): boolean;
}

/** One poll: "more" to poll again, "done" once the stream has nothing more to send. */
export type AguiPoll = (sink: AguiSink) => Promise<"more" | "done">;

/** The streams of a turn's roles, keyed by its task id (numbered 1 to 4 in the position). */
export const TURN_STREAMS = ["support_route", "order_lookup", "reply", "delivery"] as const;

/**
 * A turn's streams after the conversation's, in the order a fresh read sends them, each with its
 * number `n` in the position (`<turn>.<n>`): its router's, its refund agent's run (where it
 * records its tool calls), then its other roles'. A number is its stream's for good (a position
 * names a stream by it): the refund agent's run, added after the four, is 5.
 */
export function turnStreamsOf(taskId: string): { n: number; stream: AggregateRef }[] {
  const [route, lookup, reply, delivery] = TURN_STREAMS;
  return [
    { n: 1, stream: { type: route, id: taskId } },
    { n: 5, stream: { type: AGENT_RUN_AGGREGATE, id: refundRunId(taskId) } },
    { n: 2, stream: { type: lookup, id: taskId } },
    { n: 3, stream: { type: reply, id: taskId } },
    { n: 4, stream: { type: delivery, id: taskId } },
  ];
}
const CONVERSATION_KEY = "c";

/** The position a `Last-Event-ID` names (400 when it names none), or the start. */
export function aguiPositionOf(lastEventId: string | undefined): Position {
  if (lastEventId === undefined) return START;
  const position = parsePosition(lastEventId);
  if (!position)
    fail(
      "invalid_request",
      `Last-Event-ID ${JSON.stringify(lastEventId)} is not a position of an AG-UI stream`,
    );
  return position;
}

/** Sends what the client at `position` has not seen; the new position. */
export function sendPending<T>(
  sink: AguiSink,
  facts: readonly PlacedFact<T>[],
  position: Position,
  eventsOf: (fact: T) => BaseEvent[],
): Position {
  let at = position;
  for (const { placed, from } of pendingAfter(facts, position)) {
    const events = eventsOf(placed.fact);
    for (let index = from; index < events.length; index++) {
      if (sink.closed()) return at;
      at = advance(at, placed, index, events.length);
      sink.write(`id: ${encodePosition(at)}\n${encodeSse(events[index] as BaseEvent)}`);
    }
    if (events.length === 0) at = advance(at, placed, 0, 0);
  }
  return at;
}

/** Reads `stream` after `after`, its personal fields opened where the function can. */
export async function readAfter(ports: AguiPorts, stream: AggregateRef, after: number) {
  const read = await ports.readStream(stream, after + 1, MAX_STREAM_VERSION);
  return ports.open ? ports.open(read) : read;
}

/** A conversation's AG-UI stream from `position` (the caller's conversation: checked first). */
export async function conversationAgui(
  ports: AguiPorts,
  caller: Caller,
  conversationId: string,
  position: Position,
): Promise<AguiPoll> {
  // A conversation without a view yet has its customer checked once it has one (it never changes).
  let checked = (await conversationOf(ports, caller, conversationId)) !== undefined;
  const id = tenantConversationId(caller.tenantId, conversationId);
  const thread: Thread = { threadId: conversationId };
  const read: Record<string, number> = { ...position.sent };
  const turns = new Map<number, string>();
  const seen = new Map<string, string>();
  let at = position;
  let revision = -1;
  let view: ConversationView | undefined;
  return async (sink) => {
    const loaded = await ports.store.load({ state: { type: CONVERSATION_VIEW, id } });
    const stored = loaded.state;
    if (!stored) return "more";
    let facts: PlacedFact<Envelope>[];
    if (stored.revision !== revision) {
      view = stored.data as ConversationView;
      if (tenantOf(view) !== caller.tenantId)
        return notFound(sink, `no conversation ${conversationId}`);
      if (!checked && !(await mayReadConversation(ports, caller, id)))
        return notFound(sink, `no conversation ${conversationId}`);
      checked = true;
      revision = stored.revision;
      facts = await conversationFacts(ports, id, view, { read, turns, seen });
      at = keepKeys(at, (key) => key === CONVERSATION_KEY || turns.has(turnOfKey(key)));
    } else if (view) facts = await underWayFacts(ports, view, { read, turns, seen });
    else return "more";
    const calls = await toolCallReadsOf(
      ports.content,
      facts.map((f) => f.fact),
    );
    at = sendPending(sink, facts, at, (e) =>
      conversationFactEvents(thread, e, calls.get(e.event_id)),
    );
    return "more";
  };
}

/**
 * The statuses of a turn whose roles are at work: its next fact comes without a person. A turn
 * held for review, or ended (delivered, rejected, cancelled, failed, superseded), is read when its
 * view changes.
 */
const UNDER_WAY: ReadonlySet<string> = new Set([
  "received",
  "routed",
  "looked_up",
  "generated",
  "approved",
]);
/** The newest turns under way whose streams are read at every poll. */
export const UNDER_WAY_TURNS_READ = 2;

/**
 * The facts stored in the streams of the newest turns under way since they were last read: what
 * a role stored shows at the next poll, before the view folds it (the view's projection consumes
 * it moments later, or later still when it lags).
 */
async function underWayFacts(
  ports: AguiPorts,
  view: ConversationView,
  reads: ConversationReads,
): Promise<PlacedFact<Envelope>[]> {
  const underWay = [...reads.turns]
    .filter(([, taskId]) => UNDER_WAY.has(String(view.turns[taskId]?.status)))
    .sort(([a], [b]) => b - a)
    .slice(0, UNDER_WAY_TURNS_READ);
  const facts: PlacedFact<Envelope>[] = [];
  for (const [turn, taskId] of underWay)
    facts.push(...(await turnFacts(ports, turn, taskId, reads.read)));
  return facts;
}

interface ConversationReads {
  /** Per key, the highest version read. */
  readonly read: Record<string, number>;
  /** The turns the view keeps: conversation version -> task id. */
  readonly turns: Map<number, string>;
  /** Each turn's JSON in the view when its streams were last read. */
  readonly seen: Map<string, string>;
}

/** The facts read since the last read: new accepted messages and the changed turns' streams. */
async function conversationFacts(
  ports: AguiPorts,
  id: string,
  view: ConversationView,
  reads: ConversationReads,
): Promise<PlacedFact<Envelope>[]> {
  reads.turns.clear();
  for (const taskId of view.turn_order) {
    const version = view.turns[taskId]?.input_version;
    if (version !== undefined) reads.turns.set(version, taskId);
  }
  const turnOf = new Map([...reads.turns].map(([version, taskId]) => [taskId, version]));
  const stream = { type: CONVERSATION_AGGREGATE, id };
  const facts: PlacedFact<Envelope>[] = [];
  const newestTurn = Math.max(0, ...reads.turns.keys());
  for (const fact of await readAfter(ports, stream, reads.read[CONVERSATION_KEY] ?? 0)) {
    const turn = turnOf.get(fact.task_id);
    const accepted = fact.event_type === "conversation.message.accepted";
    // A message newer than every turn of the view: it has no place yet, so it is read again
    // once the view has its turn (rather than passed over for the rest of the connection).
    if (accepted && turn === undefined && turnVersionOf(fact) > newestTurn) break;
    reads.read[CONVERSATION_KEY] = fact.aggregate.version;
    if (!accepted || turn === undefined) continue;
    facts.push({ key: CONVERSATION_KEY, version: fact.aggregate.version, sort: [turn, 0], fact });
  }
  for (const [turn, taskId] of reads.turns) {
    const now = JSON.stringify(view.turns[taskId]);
    if (reads.seen.get(taskId) === now) continue;
    reads.seen.set(taskId, now);
    facts.push(...(await turnFacts(ports, turn, taskId, reads.read)));
  }
  return facts;
}

/** A turn's facts in its streams after what was read of each. */
async function turnFacts(
  ports: AguiPorts,
  turn: number,
  taskId: string,
  read: Record<string, number>,
): Promise<PlacedFact<Envelope>[]> {
  const facts: PlacedFact<Envelope>[] = [];
  for (const [index, { n, stream }] of turnStreamsOf(taskId).entries()) {
    const key = `${turn}.${n}`;
    for (const fact of await readAfter(ports, stream, read[key] ?? 0)) {
      read[key] = fact.aggregate.version;
      facts.push({ key, version: fact.aggregate.version, sort: [turn, index + 1], fact });
    }
  }
  return facts;
}

/**
 * What is found not the caller's while the stream is open (another tenant's, or another
 * customer's conversation once it has a view): a RUN_ERROR, and the stream ends.
 */
export function notFound(sink: AguiSink, message: string): "done" {
  const error = { type: EventType.RUN_ERROR, code: "not_found", message } as BaseEvent;
  sink.write(encodeSse(error));
  return "done";
}

/** The conversation version an accepted message opened its turn at (its `version`). */
function turnVersionOf(fact: Envelope): number {
  const version = (fact.payload as { version?: unknown } | null)?.version;
  return typeof version === "number" ? version : fact.aggregate.version;
}

function turnOfKey(key: string): number {
  return Number(key.split(".")[0]);
}
