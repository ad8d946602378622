import type { AggregateRef, Envelope, EventPayloads, EventType, StateSummary } from "../../../kit";
import {
  AGENT_RUN_AGGREGATE,
  defineRole,
  ERASED,
  newestWithin,
  PermanentError,
  payloadOf,
} from "../../../kit";
import { REFUND_RUN_PREFIX, refundRunId } from "../../refund-review/ids";
import { ORDER_LOOKUP_AGGREGATE } from "../order-lookup/order-lookup";
import { REPLY_AGGREGATE } from "../reply-generation/reply-generation";
import { SUPPORT_ROUTE_AGGREGATE } from "../router/router";
import { DELIVERY_AGGREGATE } from "../sender/sender";

/**
 * The conversation read model: one view per conversation (aggregate
 * `conversation_view/<conversation_id>`, taken from the payload), with one turn per customer
 * message (keyed by task id) that follows it through routing, order lookup, generation and
 * delivery. It emits nothing.
 *
 * The facts of one turn come from different streams (conversation, support_route, order_lookup,
 * reply, delivery), so the fold does not assume their order: each fact fills in its fields, and
 * the turn's status only moves forward (received < routed < looked_up < generated <
 * held_for_review < rejected < approved < cancelled < failed < superseded < delivered; a late
 * `notification.failed` does not undo a delivery, and a cancelled turn whose reply was delivered
 * before the cancel stays delivered). A held reply a person rejected ends `rejected` (nothing is sent); one a
 * person approved is `approved` until its delivery's outcome. A step that failed for good
 * (`support.step.failed`) makes the turn `failed` with `step_failure`, until the hand-off message
 * it asked for is delivered. A turn a newer message superseded before its reply (or hand-off) went
 * out (`support.superseded`) ends `superseded`, with `superseded_by`, the turn that answers it.
 * A fact for a turn not seen yet opens it. The view keeps the last TURN_LIMIT turns by first
 * appearance; a fact of an older turn that was already dropped is ignored.
 */

export const CONVERSATION_VIEW_AGGREGATE = "conversation_view";
export const TURN_LIMIT = 50;
/** The most the kept turns may take in the view's state item (JSON bytes), oldest dropped first. */
export const TURNS_MAX_BYTES = 192 * 1024;

export const TURN_STATUSES = [
  "received",
  "routed",
  "looked_up",
  "generated",
  "held_for_review",
  "rejected",
  "approved",
  "cancelled",
  "failed",
  "superseded",
  "delivered",
] as const;
export type TurnStatus = (typeof TURN_STATUSES)[number];

export interface TurnDelivery {
  readonly idempotency_key: string;
  readonly delivery_id?: string;
  readonly confirmed_by?: string;
  /** The failure code, when the delivery failed. */
  readonly code?: string;
}

export interface ConversationTurn {
  readonly task_id: string;
  /** The conversation version the message made current. */
  readonly input_version?: number;
  /** The customer's message (known once `conversation.message.accepted` is folded). */
  readonly text?: string;
  readonly intent?: string;
  readonly order_id?: string;
  readonly order_found?: boolean;
  /** When order lookup read the order (the reply's facts date from then). */
  readonly looked_up_at?: string;
  readonly reply_text?: string;
  /** Why the reply was held, when it was. */
  readonly held_reason?: string;
  /** Who approved or rejected the held reply. */
  readonly reviewed_by?: string;
  /** Who cancelled the turn (`support.cancelled`). */
  readonly cancelled_by?: string;
  readonly status: TurnStatus;
  readonly delivery?: TurnDelivery;
  /** The step that failed for good, when one did; the delivery is then the hand-off message. */
  readonly step_failure?: { readonly step: string; readonly code: string };
  /** The turn (task id) that answers instead, when a newer message superseded this one. */
  readonly superseded_by?: string;
}

export interface ConversationView {
  readonly conversation_id: string;
  /** The tenant whose conversation it is: its first message's (absent: the default tenant). */
  readonly tenant_id?: string;
  /** The highest conversation version seen. */
  readonly version: number;
  readonly turns: Readonly<Record<string, ConversationTurn>>;
  /** Task ids of `turns`, oldest first. */
  readonly turn_order: readonly string[];
  /** The highest input version of a turn dropped to keep the view small (absent: none yet). */
  readonly dropped_through?: number;
}

/** The fields a fact sets in its turn, and the status it moves the turn to. */
type TurnChanges = Partial<Omit<ConversationTurn, "task_id">>;
type Fold<P> = (payload: P) => TurnChanges;
/** A fold per event type, each taking the payload the registry defines for its type. */
type Folds<K extends EventType> = { readonly [T in K]: Fold<EventPayloads[T]> };

/**
 * What each fact changes in its turn, in subscription order. A payload reaches the view at its
 * type's newest schema version (the pipeline upcasts older ones), so each fold takes that type.
 */
const FOLDS = {
  "conversation.message.accepted": (p) => ({
    status: "received",
    input_version: p.version,
    text: p.text,
  }),
  "support.routed": (p) => ({
    status: "routed",
    intent: p.intent,
    ...(p.order_id === undefined ? {} : { order_id: p.order_id }),
  }),
  "order.lookup.completed": (p) => ({
    status: "looked_up",
    order_id: p.order_id,
    order_found: p.found,
    looked_up_at: p.looked_up_at,
  }),
  "reply.generated": (p) => ({ status: "generated", reply_text: p.reply_text }),
  "reply.held_for_review": (p) => ({
    status: "held_for_review",
    reply_text: p.reply_text,
    held_reason: p.reason,
  }),
  "reply.approved": (p) => ({
    status: "approved",
    reply_text: p.reply_text,
    reviewed_by: p.requested_by,
  }),
  "reply.rejected": (p) => ({ status: "rejected", reviewed_by: p.requested_by }),
  "notification.delivered": (p) => ({
    status: "delivered",
    delivery: {
      idempotency_key: p.idempotency_key,
      delivery_id: p.delivery_id,
      confirmed_by: p.confirmed_by,
    },
  }),
  "notification.failed": (p) => ({
    status: "failed",
    delivery: { idempotency_key: p.idempotency_key, code: p.code },
  }),
  "support.step.failed": (p) => ({
    status: "failed",
    step_failure: { step: p.step, code: p.code },
  }),
  "support.cancelled": (p) => ({ status: "cancelled", cancelled_by: p.requested_by }),
  "support.superseded": (p) => ({ status: "superseded", superseded_by: p.superseded_by }),
} satisfies Partial<Folds<EventType>>;

/** The event types the view folds. */
type FoldedType = keyof typeof FOLDS;
/** FOLDS as a mapped type, so that a fold picked by a type variable takes that type's payload. */
const TURN_FOLDS: Folds<FoldedType> = FOLDS;

/** The keys of TURN_FOLDS (which `Object.keys` types as strings). */
export const CONVERSATION_PROJECTION_SUBSCRIPTIONS = Object.keys(TURN_FOLDS) as FoldedType[];

export const conversationProjection = defineRole<ConversationView, FoldedType>({
  group: "conversation-projection",
  summarize: summarizeConversation,
  subscriptions: CONVERSATION_PROJECTION_SUBSCRIPTIONS,
  // The view shows the turns' words, the replies and why a person decided as they did.
  readsPersonal: [
    "conversation.message.accepted",
    "reply.generated",
    "reply.held_for_review",
    "reply.approved",
    "reply.rejected",
  ],
  stateOf: (event) => ({
    type: CONVERSATION_VIEW_AGGREGATE,
    id: foldedPayload(event).conversation_id,
  }),
  personalState: {
    stateOf: ({ conversationId, taskId }) =>
      taskId ? undefined : { type: CONVERSATION_VIEW_AGGREGATE, id: conversationId },
    erase: eraseView,
  },
  // The view's checkpoints of its streams record what it applied (lib/operator/self-recorded).
  // A turn's facts come on streams of its own (forgetsStream): once the turn is dropped their
  // checkpoints go too, and a fact of theirs that comes again is ignored (isDroppedTurn), so the
  // item stays the size of the turns it keeps however long the conversation runs.
  forgets: forgetsStream,
  decide(view, event) {
    const conversationId = event.payload.conversation_id;
    const base: ConversationView = view ?? {
      conversation_id: conversationId,
      ...(event.tenant_id === undefined ? {} : { tenant_id: event.tenant_id }),
      version: 0,
      turns: {},
      turn_order: [],
    };
    const taskId = event.task_id;
    const current = base.turns[taskId];
    if (current === undefined && isDroppedTurn(base, event)) return {};
    const opened: ConversationTurn = current ?? {
      task_id: taskId,
      ...(event.input_version === undefined ? {} : { input_version: event.input_version }),
      status: "received",
    };
    const { status, delivery, ...fields } = changesOf(event);
    const forward = status !== undefined && rank(status) >= rank(opened.status);
    const turn: ConversationTurn = {
      ...opened,
      ...fields,
      // A delivery outcome that arrives after a better one (failed after delivered) is ignored.
      ...(delivery !== undefined && forward ? { delivery } : {}),
      status: forward ? status : opened.status,
    };
    const all = current === undefined ? [...base.turn_order, taskId] : [...base.turn_order];
    const turns: Record<string, ConversationTurn> = { ...base.turns, [taskId]: turn };
    const order = keptTurns(all.slice(-TURN_LIMIT), turns);
    let droppedThrough = base.dropped_through;
    for (const id of all.slice(0, all.length - order.length)) {
      const dropped = turns[id]?.input_version;
      if (dropped !== undefined) droppedThrough = Math.max(droppedThrough ?? 0, dropped);
      delete turns[id];
    }
    return {
      state: {
        conversation_id: base.conversation_id,
        ...(base.tenant_id === undefined ? {} : { tenant_id: base.tenant_id }),
        version: Math.max(base.version, turn.input_version ?? 0),
        turns,
        turn_order: order,
        ...(droppedThrough === undefined ? {} : { dropped_through: droppedThrough }),
      },
    };
  },
});

/** The stream types whose id is the task of the turn their facts belong to: its steps'. */
const TURN_STEP_STREAMS: ReadonlySet<string> = new Set([
  SUPPORT_ROUTE_AGGREGATE,
  ORDER_LOOKUP_AGGREGATE,
  REPLY_AGGREGATE,
  DELIVERY_AGGREGATE,
]);

/**
 * Whether the view keeps nothing more of a stream: one of a turn's own (a step's, whose id is the
 * task, or its refund review's run, `refundRunId` of the task) whose turn it no longer keeps. Any
 * other stream (the conversation's, one whose turn it cannot tell) keeps its checkpoint.
 */
function forgetsStream(view: ConversationView, stream: AggregateRef): boolean {
  if (TURN_STEP_STREAMS.has(stream.type)) return view.turns[stream.id] === undefined;
  if (stream.type === AGENT_RUN_AGGREGATE && stream.id.startsWith(REFUND_RUN_PREFIX))
    return !view.turn_order.some((task) => refundRunId(task) === stream.id);
  return false;
}

/** The newest turns whose JSON fits TURNS_MAX_BYTES (texts and replies can be long). */
function keptTurns(order: readonly string[], turns: Record<string, ConversationTurn>): string[] {
  const kept = newestWithin(
    order.map((id) => ({ id, turn: turns[id] })),
    TURNS_MAX_BYTES,
  );
  return kept.map((k) => k.id);
}

function rank(status: TurnStatus): number {
  return TURN_STATUSES.indexOf(status);
}

/** A fact of a turn that was dropped already, or older than every kept turn of a full view. */
function isDroppedTurn(view: ConversationView, event: Envelope): boolean {
  if (event.input_version === undefined) return false;
  if (view.dropped_through !== undefined && event.input_version <= view.dropped_through)
    return true;
  if (view.turn_order.length < TURN_LIMIT) return false;
  const kept = view.turn_order
    .map((id) => view.turns[id]?.input_version)
    .filter((v): v is number => v !== undefined);
  return kept.length > 0 && event.input_version < Math.min(...kept);
}

/** The type of a fact the view folds; a type it does not fold is refused. */
function foldedType(event: Envelope): FoldedType {
  const type = event.event_type;
  if (!isFolded(type))
    throw new PermanentError("projection.unhandled", `conversation-projection cannot fold ${type}`);
  return type;
}

function isFolded(type: string): type is FoldedType {
  return Object.hasOwn(TURN_FOLDS, type);
}

/** The payload of a fact the view folds (each of them names its conversation). */
function foldedPayload(event: Envelope): EventPayloads[FoldedType] {
  return payloadOf(event, foldedType(event));
}

/** What `event` changes in its turn (TURN_FOLDS). */
function changesOf(event: Envelope): TurnChanges {
  return applyFold(foldedType(event), event);
}

function applyFold<K extends FoldedType>(type: K, event: Envelope): TurnChanges {
  const fold: Fold<EventPayloads[K]> = TURN_FOLDS[type];
  return fold(payloadOf(event, type));
}

/**
 * A conversation, by its newest turn's status; a held reply waits for a person (`held_reply`),
 * and so does a conversation whose newest turn was handed off after a step failed for good
 * (`handed_off`: the customer was told a person will get back to them) until the customer writes
 * again. Turns handed off are counted (`handed_off`).
 */
export function summarizeConversation(view: ConversationView): StateSummary {
  const turns = view.turn_order.flatMap((id) => {
    const turn = view.turns[id];
    return turn ? [turn] : [];
  });
  const held = turns.filter((t) => t.status === "held_for_review").length;
  const handedOff = turns.filter((t) => t.step_failure !== undefined).length;
  const newest = turns.at(-1);
  return {
    kind: "conversation",
    status: newest?.status ?? "empty",
    ...(newest?.intent ? { label: newest.intent } : {}),
    ...(held > 0
      ? { waiting: "held_reply" }
      : newest?.step_failure !== undefined
        ? { waiting: "handed_off" }
        : {}),
    counts: { turns: turns.length, held, ...(handedOff > 0 ? { handed_off: handedOff } : {}) },
    ...(view.tenant_id === undefined ? {} : { tenant: view.tenant_id }),
  };
}

/** The view with each turn's message and reply text `[erased]` (Role.personalState). */
function eraseView(view: ConversationView): ConversationView {
  const turns = Object.fromEntries(
    Object.entries(view.turns).map(([id, turn]) => [
      id,
      {
        ...turn,
        ...(turn.text === undefined ? {} : { text: ERASED }),
        ...(turn.reply_text === undefined ? {} : { reply_text: ERASED }),
      },
    ]),
  );
  return { ...view, turns };
}
