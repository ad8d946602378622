import type { EventStore, Role } from "../../../kit";
import {
  CONVERSATION_AGGREGATE,
  defineRole,
  type Envelope,
  ERASED,
  type EventOf,
  MAX_STREAM_VERSION,
  newestWithin,
  PermanentError,
  payloadOf,
  type TypedDecision,
  tenantOf,
} from "../../../kit";
import type { RouteRequested } from "../events/commands";
import type { MessageAccepted, SequenceSkipped } from "../events/conversation";
import {
  type ClientMessage,
  type ClientOrder,
  clientMessageOf,
  DEFAULT_HOLD_SECONDS,
  isRepeat,
  type Settled,
  type SkippedGap,
  settle,
} from "./client-order";

/**
 * The conversation group: the ingress of the customer-support workflow (seed 000 §10, §11.2).
 *
 * A client sends `conversation.message.received` (unsequenced, aggregate
 * `conversation/<conversation_id>` at version 0, a new `task_id` per message). For each message
 * the conversation's version goes up by one, and two events are appended to the conversation's
 * stream:
 * - `conversation.message.accepted` (the fact; payload `version` = the new version);
 * - `support.route.requested` (the command for the router), carrying `input_version` = the new
 *   version and `expires_at` = now + `replyTtlSeconds` (the reply deadline). It carries no
 *   customer text: its `context_version` names the conversation's messages through the new
 *   version, which the router and reply generation read from this state
 *   (`conversationContextReader`).
 * Both carry the message's `task_id`, the conversation id and `order_key` = conversation id, so
 * every group handles one conversation's work in order.
 *
 * The conversation version is what later steps compare against to drop a reply that a newer
 * message made stale (`superseded`): see `conversationVersionReader`.
 *
 * Refused (PermanentError, the message goes to the DLQ):
 * - `conversation.aggregate_mismatch`: the aggregate is not `conversation/<id>`, or the envelope's
 *   `conversation_id` differs from the aggregate id;
 * - `conversation.customer_mismatch`: the conversation belongs to another customer;
 * - `conversation.tenant_mismatch`: the conversation belongs to another tenant (the first
 *   message's; a state from before tenants belongs to the default one), as the pipeline checks
 *   for every role that says whose its states are (`tenantOfState`). The front door refuses such a
 *   message first (404); this holds when two tenants' first messages race.
 */

export { CONVERSATION_AGGREGATE };
/** How many recent messages the conversation state keeps. */
export const CONVERSATION_MESSAGE_LIMIT = 50;
/**
 * The most the kept messages may take in the conversation's state item (JSON bytes): long
 * messages are dropped oldest first before the count limit is reached, so the item stays well
 * inside DynamoDB's 400 KB.
 */
export const MESSAGES_MAX_BYTES = 192 * 1024;
export const DEFAULT_REPLY_TTL_SECONDS = 300;

export interface ConversationMessage {
  /** The conversation version this message made current. */
  readonly version: number;
  readonly task_id: string;
  readonly text: string;
  readonly message_event_id: string;
  readonly received_at: string;
}

export interface ConversationState extends ClientOrder {
  readonly conversation_id: string;
  readonly customer_id: string;
  /** The tenant of the conversation's first message (absent: the default tenant). */
  readonly tenant_id?: string;
  /** Number of messages accepted so far (the conversation version). */
  readonly version: number;
  /** The last CONVERSATION_MESSAGE_LIMIT messages (at most MESSAGES_MAX_BYTES), oldest first. */
  readonly messages: readonly ConversationMessage[];
}

export interface ConversationOptions {
  /** Seconds from acceptance until the reply is no longer worth sending. @default 300 */
  readonly replyTtlSeconds?: number;
  /**
   * Seconds a message waits for the ones its client sent before it (./client-order.ts).
   * @default 60
   */
  readonly holdSeconds?: number;
}

export function conversationRole(options: ConversationOptions = {}): Role<ConversationState> {
  const ttl = options.replyTtlSeconds ?? DEFAULT_REPLY_TTL_SECONDS;
  const holdSeconds = options.holdSeconds ?? DEFAULT_HOLD_SECONDS;
  for (const [name, value] of Object.entries({ replyTtlSeconds: ttl, holdSeconds }))
    if (!Number.isFinite(value) || value <= 0)
      throw new PermanentError(
        "conversation.invalid_option",
        `${name} must be a positive number, got ${value}`,
      );
  const settings: Settings = { ttl, holdSeconds };

  return defineRole<
    ConversationState,
    "conversation.message.received" | "conversation.hold.expired",
    ConversationEmit
  >({
    group: "conversation",
    subscriptions: ["conversation.message.received", "conversation.hold.expired"],
    // The customer's words go into the conversation and on to its turn.
    readsPersonal: ["conversation.message.received"],
    emits: [
      "conversation.message.accepted",
      "support.route.requested",
      "conversation.sequence.skipped",
    ],
    decide: (state, event, { now }) =>
      event.event_type === "conversation.hold.expired"
        ? settleHeld(state, event, now, settings)
        : receiveMessage(state, event, now, settings),
    // A conversation that names no tenant is the default tenant's (those from before tenants).
    tenantOfState: tenantOf,
    // Its last 50 messages, 3 KB and more, rewritten in a transaction with every message: only
    // AgentBus reads it (the view is what others read), so it is stored deflated.
    compactState: true,
    personalState: {
      stateOf: ({ conversationId, taskId }) =>
        taskId ? undefined : { type: CONVERSATION_AGGREGATE, id: conversationId },
      erase: (state) => ({
        ...state,
        messages: state.messages.map((m) => ({ ...m, text: ERASED })),
        ...(state.held ? { held: state.held.map((m) => ({ ...m, text: ERASED })) } : {}),
      }),
    },
  });
}

/**
 * What the conversation emits for each message: the fact and the router's command, after the
 * record of the sequences it skipped, if any.
 */
type ConversationEmit =
  | "conversation.message.accepted"
  | "support.route.requested"
  | "conversation.sequence.skipped";

/** A conversation takes messages of its own customer only (its tenant: see top). */
function refuseForeign(
  state: ConversationState | undefined,
  event: EventOf<"conversation.message.received">,
  conversationId: string,
): void {
  if (!state) return;
  const details = { conversation_id: conversationId, event_id: event.event_id };
  if (state.customer_id !== event.payload.customer_id)
    throw new PermanentError(
      "conversation.customer_mismatch",
      `conversation ${conversationId} belongs to another customer`,
      { details },
    );
}

interface Settings {
  readonly ttl: number;
  readonly holdSeconds: number;
}

/**
 * A customer message: applied now, in its client's order (./client-order.ts) with any held
 * messages that follow it, held until its turn, or discarded as a repeat.
 */
function receiveMessage(
  state: ConversationState | undefined,
  event: EventOf<"conversation.message.received">,
  now: Date,
  settings: Settings,
): TypedDecision<ConversationState, ConversationEmit> {
  const conversationId = checkedConversationId(event);
  refuseForeign(state, event, conversationId);
  const message = clientMessageOf(event, now);
  if (isRepeat(state, message)) return { discarded: "superseded" };
  const tenant = state ? state.tenant_id : event.tenant_id;
  const settled = settle(state, message, now, settings.holdSeconds);
  return applySettled(state, { conversationId, tenant }, settled, now, settings.ttl);
}

/** The sweeper's nudge: the held messages whose wait is over are applied (./client-order.ts). */
function settleHeld(
  state: ConversationState | undefined,
  event: EventOf<"conversation.hold.expired">,
  now: Date,
  settings: Settings,
): TypedDecision<ConversationState, ConversationEmit> {
  if (!state?.held?.length) return {};
  const where = { conversationId: event.payload.conversation_id, tenant: state.tenant_id };
  const settled = settle(state, undefined, now, settings.holdSeconds);
  return applySettled(state, where, settled, now, settings.ttl);
}

/**
 * The messages `settled` applies, in order: for each, the next version of the conversation with
 * the message kept, and `conversation.message.accepted` plus `support.route.requested` (which
 * expires at the reply's deadline) for its turn, after `conversation.sequence.skipped` when it
 * skipped sequences; the rest held, due when the oldest's wait is over.
 */
function applySettled(
  state: ConversationState | undefined,
  where: { readonly conversationId: string; readonly tenant: string | undefined },
  settled: Settled,
  now: Date,
  ttl: number,
): TypedDecision<ConversationState, ConversationEmit> {
  let next = state;
  const emit: TypedDecision<ConversationState, ConversationEmit>["emit"] & unknown[] = [];
  for (const { message, skipped } of settled.apply) {
    if (skipped) emit.push(skippedSpec(where.conversationId, skipped, message));
    const accepted = acceptMessage(next, where, message, now, ttl);
    next = accepted.state;
    emit.push(...accepted.emit);
  }
  const { client_seq: _seq, held: _held, ...rest } = next ?? newConversation(where, settled);
  const order = {
    ...(settled.clientSeq === undefined ? {} : { client_seq: settled.clientSeq }),
    ...(settled.held.length === 0 ? {} : { held: settled.held }),
  };
  return { state: { ...rest, ...order }, emit, dueAt: settled.dueAt };
}

/** A conversation whose first messages are all held: nothing accepted yet. */
function newConversation(
  where: { readonly conversationId: string; readonly tenant: string | undefined },
  settled: Settled,
): ConversationState {
  return {
    conversation_id: where.conversationId,
    customer_id: settled.held[0]?.customer_id ?? "",
    ...(where.tenant === undefined ? {} : { tenant_id: where.tenant }),
    version: 0,
    messages: [],
  };
}

function skippedSpec(conversationId: string, gap: SkippedGap, message: ClientMessage) {
  const payload: SequenceSkipped = {
    conversation_id: conversationId,
    from: gap.from,
    to: gap.to,
    message_event_id: message.event_id,
    waited_seconds: Math.round(gap.waitedSeconds * 1000) / 1000,
  };
  return {
    type: "conversation.sequence.skipped" as const,
    payload,
    taskId: message.task_id,
    conversationId,
    orderKey: conversationId,
    cause: { eventId: message.event_id, correlationId: message.correlation_id },
  };
}

/**
 * One message accepted: the next version of the conversation with the message kept, and
 * `conversation.message.accepted` plus `support.route.requested` for its turn.
 */
function acceptMessage(
  state: ConversationState | undefined,
  where: { readonly conversationId: string; readonly tenant: string | undefined },
  message: ClientMessage,
  now: Date,
  ttl: number,
) {
  const { conversationId, tenant } = where;
  const version = (state?.version ?? 0) + 1;
  const next: ConversationState = {
    ...state,
    conversation_id: conversationId,
    customer_id: message.customer_id,
    ...(tenant === undefined ? {} : { tenant_id: tenant }),
    version,
    messages: keptMessages(state, {
      version,
      task_id: message.task_id,
      text: message.text,
      message_event_id: message.event_id,
      received_at: message.received_at,
    }),
  };
  const turn: RouteRequested = {
    conversation_id: conversationId,
    customer_id: message.customer_id,
    channel: message.channel,
    message_event_id: message.event_id,
    context_version: version,
  };
  const { context_version: _context, ...who } = turn;
  const accepted: MessageAccepted = { ...who, text: message.text, version };
  const common = {
    inputVersion: version,
    taskId: message.task_id,
    conversationId,
    orderKey: conversationId,
    cause: { eventId: message.event_id, correlationId: message.correlation_id },
  };
  return {
    state: next,
    emit: [
      { type: "conversation.message.accepted" as const, payload: accepted, ...common },
      {
        type: "support.route.requested" as const,
        payload: turn,
        ...common,
        expiresAt: replyDeadline(message, now, ttl),
      },
    ],
  };
}

/**
 * When a reply to the message stops being worth sending: `replyTtlSeconds` after acceptance, or
 * earlier when the client's message says so with its own `expires_at`.
 */
export function replyDeadline(
  event: Pick<Envelope, "expires_at">,
  now: Date,
  ttlSeconds: number,
): string {
  const own = now.getTime() + ttlSeconds * 1000;
  const client = event.expires_at === undefined ? own : Date.parse(event.expires_at);
  return new Date(Math.min(own, client)).toISOString();
}

/** The conversation group with the default reply deadline. */
export const conversation = conversationRole();

/**
 * Reads a conversation's current version (0 when it has none yet): what reply generation and the
 * sender compare an event's `input_version` against for their superseded checks.
 */
export function conversationVersionReader(
  store: EventStore,
): (conversationId: string) => Promise<number> {
  const read = conversationReader(store);
  return async (conversationId) => (await read(conversationId)).version;
}

function checkedConversationId(event: Envelope): string {
  const { type, id } = event.aggregate;
  if (type !== CONVERSATION_AGGREGATE)
    throw new PermanentError(
      "conversation.aggregate_mismatch",
      `a message must be sent on aggregate ${CONVERSATION_AGGREGATE}/<conversation_id>, not ${type}/${id}`,
      { details: { event_id: event.event_id, aggregate: event.aggregate } },
    );
  if (event.conversation_id !== undefined && event.conversation_id !== id)
    throw new PermanentError(
      "conversation.aggregate_mismatch",
      `the envelope's conversation_id ${event.conversation_id} differs from its aggregate id ${id}`,
      { details: { event_id: event.event_id, aggregate: event.aggregate } },
    );
  return id;
}

/** The state's messages with `added`: the last CONVERSATION_MESSAGE_LIMIT within MESSAGES_MAX_BYTES. */
function keptMessages(
  state: ConversationState | undefined,
  added: ConversationState["messages"][number],
): ConversationState["messages"] {
  const all = [...(state?.messages ?? []), added].slice(-CONVERSATION_MESSAGE_LIMIT);
  return newestWithin(all, MESSAGES_MAX_BYTES);
}

/** One message of a conversation's context window, as a step reads it. */
export interface ContextMessage {
  readonly version: number;
  readonly message_event_id: string;
  readonly text: string;
  readonly received_at: string;
}

/** The messages a step works on: the conversation's context through `throughVersion`. */
export type ConversationContextReader = (
  conversationId: string,
  throughVersion: number,
) => Promise<readonly ContextMessage[]>;

/** At most this many messages make up a turn's context (the turn's own message included). */
export const CONTEXT_MESSAGES = 5;
/**
 * Earlier messages count only when received within this many seconds before the turn's own: a
 * message sent in quick succession continues the one before it (whose reply it supersedes); a
 * later one starts afresh.
 */
export const CONTEXT_WINDOW_SECONDS = 120;
/** The most the context's texts may take (JSON bytes); the oldest are left out first. */
export const CONTEXT_MAX_BYTES = 8 * 1024;

/**
 * A turn's context (seed 000 §11.2): the turn's own message (version `throughVersion`) and the
 * ones just before it, oldest first: at most CONTEXT_MESSAGES, received within
 * CONTEXT_WINDOW_SECONDS before it, within CONTEXT_MAX_BYTES. A customer who writes "I want to
 * check my order" and then "the order number is A-1002" is answered about A-1002 from both. The
 * turn's own message missing from the state is a PermanentError (`conversation.context_missing`).
 */
export function contextWindow(
  state: ConversationState | undefined,
  conversationId: string,
  throughVersion: number,
): ContextMessage[] {
  const upTo = (state?.messages ?? []).filter((m) => m.version <= throughVersion);
  const own = upTo.at(-1);
  if (!own || own.version !== throughVersion)
    throw new PermanentError(
      "conversation.context_missing",
      `conversation ${conversationId} has no message at version ${throughVersion} in its state`,
      { details: { conversation_id: conversationId, version: throughVersion } },
    );
  const since = Date.parse(own.received_at) - CONTEXT_WINDOW_SECONDS * 1000;
  const recent = upTo
    .slice(-CONTEXT_MESSAGES)
    .filter((m) => m === own || Date.parse(m.received_at) >= since)
    .map(({ version, message_event_id, text, received_at }) => ({
      version,
      message_event_id,
      text,
      received_at,
    }));
  return newestWithin(recent, CONTEXT_MAX_BYTES);
}

/** Reads a turn's context from the conversation's state (see `contextWindow`). */
export function conversationContextReader(store: EventStore): ConversationContextReader {
  const read = conversationReader(store);
  return async (conversationId, throughVersion) =>
    (await read(conversationId)).context(throughVersion);
}

/**
 * A turn's context as the conversation's stream recorded it, for folding a step again (the
 * operator's rebuild and check) without the state as it is now, which may have let the turn's
 * messages go: the messages of its `conversation.message.accepted` facts through `throughVersion`,
 * each received when its fact occurred (the conversation's decision time), kept as the state kept
 * them (`keptMessages`), then `contextWindow`.
 */
export function streamContextReader(
  readStream: EventStore["readStream"],
): ConversationContextReader {
  return async (conversationId, throughVersion) => {
    const stream = { type: CONVERSATION_AGGREGATE, id: conversationId };
    let state: ConversationState | undefined;
    for (const event of await readStream(stream, 1, MAX_STREAM_VERSION)) {
      if (event.event_type !== "conversation.message.accepted") continue;
      const accepted = payloadOf(event, "conversation.message.accepted");
      if (accepted.version > throughVersion) break;
      state = {
        conversation_id: conversationId,
        customer_id: accepted.customer_id,
        version: accepted.version,
        messages: keptMessages(state, {
          version: accepted.version,
          task_id: event.task_id,
          text: accepted.text,
          message_event_id: accepted.message_event_id,
          received_at: event.occurred_at,
        }),
      };
    }
    return contextWindow(state, conversationId, throughVersion);
  };
}

/** One read of a conversation's state: its current version and the context of any of its turns. */
export interface ConversationSnapshot {
  /** The conversation version (0 when it has none yet). */
  readonly version: number;
  /**
   * The task of the message at `version`: the conversation's newest turn, which answers the ones
   * it superseded (undefined when the conversation has none yet).
   */
  readonly newestTask?: string;
  /** The context of the turn at `throughVersion` (see `contextWindow`). */
  context(throughVersion: number): readonly ContextMessage[];
}

export type ConversationReader = (conversationId: string) => Promise<ConversationSnapshot>;

/**
 * Reads a conversation's state once, for a step that needs its version and a turn's context
 * (reply generation's superseded check, then its prompt), or the turn that supersedes another.
 */
export function conversationReader(store: EventStore): ConversationReader {
  return async (conversationId) => {
    const loaded = await store.load({
      state: { type: CONVERSATION_AGGREGATE, id: conversationId },
    });
    const data = loaded.state?.data as ConversationState | null | undefined;
    const version = typeof data?.version === "number" ? data.version : 0;
    // The newest message is always kept (keptMessages), so the state names its task.
    const newest = data?.messages.at(-1);
    return {
      version,
      ...(newest?.version === version ? { newestTask: newest.task_id } : {}),
      context: (throughVersion) => contextWindow(data ?? undefined, conversationId, throughVersion),
    };
  };
}

/**
 * A conversation read once per event by a role that needs it in both `discard` (the version, for
 * its superseded check) and then `decide` (a turn's context) or the facts of the discard (the
 * turn that superseded it): `discard` reads and leaves the snapshot for the next step, which
 * takes it. Kept by envelope object, so a new delivery (a new envelope) reads again; taken out by
 * the next step, so a round the pipeline retries after a commit conflict (the same envelope,
 * `discard` first again) reads again too.
 */
export class ConversationReads {
  private readonly pending = new WeakMap<Envelope, Promise<ConversationSnapshot>>();
  constructor(
    private readonly read: ConversationReader,
    private readonly conversationOf: (event: Envelope) => string,
  ) {}

  forDiscard(event: Envelope): Promise<ConversationSnapshot> {
    const snapshot = this.read(this.conversationOf(event));
    this.pending.set(event, snapshot);
    return snapshot;
  }

  /** What `discard` read for this event, or a new read when it read nothing. */
  afterDiscard(event: Envelope): Promise<ConversationSnapshot> {
    const snapshot = this.pending.get(event) ?? this.read(this.conversationOf(event));
    this.pending.delete(event);
    return snapshot;
  }
}
