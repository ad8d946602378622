import type { AggregateRef, Envelope } from "../../schemas";
import type { ContentStore } from "./agent/content";
import type { EmitSpec, HeartbeatSpec } from "./emit";
import type { ErrorInfo } from "./errors";
import type { DiscardReason, RecordedDecision, StateSummary, StoredState } from "./ports";
import type { ReplayMark } from "./replay";

/**
 * The role contract: what a consumer group's role is to the pipeline (./pipeline consumes an event
 * through it; ./apply and ./commit decide and record with it), and what one consumed event comes
 * to. Types only, imported by every ring that builds or runs a role.
 */

/** A role's answer to one event: the next state of its aggregate and what to emit. */
export interface Decision<S> {
  /** The next state; leave out to keep the current one. */
  readonly state?: S;
  readonly emit?: readonly EmitSpec[];
  /**
   * When the aggregate next needs a sweeper's attention (ISO 8601), written with the state; null
   * or left out = not due (any earlier due time is cleared). Only used when the state is written.
   */
  readonly dueAt?: string | null;
  /**
   * Record the event as discarded with this reason instead of applied; the state and events of
   * the decision still commit. For a role that, while resolving work it had started
   * (`DecideContext.resolving`), finds there is nothing left to finish (and for the facts of a
   * discard, `RoleDecision.discarded`).
   */
  readonly discarded?: DiscardReason;
}

export interface DecideContext<S> {
  readonly now: Date;
  /**
   * How many times the queue has handed this message out (1 on first delivery): the processing
   * attempt, which every event the decision emits carries as its `attempt`.
   */
  readonly receiveCount: number;
  readonly stored: StoredState<S> | undefined;
  /** True when the event was read from the event store to fill a version gap. */
  readonly repaired: boolean;
  /**
   * Set when the event is expired or the role's `discard` gave a reason, but the role has
   * unfinished work for it (`Role.unfinished`): `decide` must finish that work and start nothing
   * new; the reason it would have been discarded for.
   */
  readonly resolving?: DiscardReason;
}

/** What a role is to its queue: its group and the event types the group receives. */
export interface RoleIdentity {
  readonly group: string;
  readonly subscriptions: readonly string[];
  /**
   * The event types the role may emit (left out: none). `defineRole` holds its decisions to them;
   * the stack grants from them what the personal fields of those types need (lib/infra/topology).
   */
  readonly emits?: readonly string[];
  /**
   * The event types among `subscriptions` whose personal fields (`personal` on their definitions)
   * the role's decision reads: the pipeline opens those, sealed on the buses and in the event
   * store, with the customer's key (`[erased]` once erased); any other type's stay sealed
   * (functions/core/personal-data/delivery.ts). Left out: none, and the group gets no key to open.
   */
  readonly readsPersonal?: readonly string[];
}

/**
 * The storage part of a role: where it keeps what it applied (its states, by `stateOf`, and the
 * checkpoints of its shared streams), how it is stored and listed, and how it is rebuilt.
 */
export interface RoleStorage<S> {
  /** The aggregate this role reads and writes for an event; defaults to the event's aggregate. */
  stateOf?(event: Envelope): AggregateRef;
  /**
   * True when the role needs no per-stream order (each event has its own state, as an audit
   * record does): every event is de-duplicated by its id, and version gaps are not repaired.
   */
  readonly unordered?: true;
  /**
   * Aggregate types whose streams this role's events go to several of its states (by `stateOf`):
   * their checkpoints are the group's own rows, read and moved with each commit, and each event
   * of a gap is applied to its own state. Other streams keep their checkpoint on the state.
   */
  readonly sharedStreams?: readonly string[];
  /**
   * True when the state keeps nothing more of a stream it applied and ignores the stream's
   * events from now on (a view that keeps its newest turns, of a turn it dropped): each commit
   * then leaves that stream's checkpoint out of the state's gate records, so they stay as small
   * as what the state keeps instead of growing with every stream it ever applied. Asked of every
   * checkpoint the state holds, with the state as the commit leaves it. An event of a forgotten
   * stream that comes again is applied again (after the stream's earlier versions, read from the
   * event store), so the role must leave the state as it is for it; a trace no longer finds the
   * group's outcome of the stream's events. Left out: every checkpoint is kept.
   */
  forgets?(state: S, stream: AggregateRef): boolean;
  /**
   * True for a stream event that begins a state of its own (a step's first request starts its
   * agent run): delivered to a state that has none and has applied nothing of the stream, nothing
   * before it in the stream is that state's, so the gap before it is not read (a stream that
   * carries many states' events would be read again for each new one). The checkpoint is then the
   * event's version. An event that may have an earlier copy unseen (a request sent again) must
   * answer false: the gap read applies that copy first. Left out: none does.
   */
  beginsState?(event: Envelope): boolean;
  /**
   * Unsequenced message types the role promises to apply idempotently by its decision: applying
   * one again, whenever it comes, changes nothing that matters (at most a lease's due time) and
   * emits nothing. The group keeps no record of them (no id among its state's recent ones, no
   * inbox row when applied), so a duplicate is decided again; a commit that changes nothing
   * writes nothing. Discards and rejections of them keep their rows. Left out: none.
   */
  readonly repeatableTypes?: readonly string[];
  /**
   * How an operator finds this state: its kind and status for lists, and what it waits for from a
   * person, if anything. Asked for each state written; undefined = not listed.
   */
  summarize?(state: S): StateSummary | undefined;
  /**
   * The tenant a state belongs to, as the state records it. With it, the pipeline refuses a
   * message from outside any stream (version 0: a client's message, an operator's command, the
   * sweeper's) to an existing state of another tenant, or naming none for a tenant's state: a
   * PermanentError `<aggregate type>.tenant_mismatch`, before the role is asked anything
   * (./apply.ts). Events on streams carry their cause's tenant (./emit.ts).
   *
   * Undefined means the state does not know its tenant (one stored before its role recorded
   * tenants): such a state is not checked, as before, rather than taken for the default tenant's,
   * which would refuse every command of its real tenant. A role whose states leave the default
   * tenant out returns DEFAULT_TENANT for them itself (`tenantOf(state)`); one that starts
   * recording tenants records every state's, the default included, so that absent stays unknown.
   */
  tenantOfState?(state: S): string | undefined;
  /**
   * True when nothing but AgentBus reads this role's states (the role itself, the operator tools
   * and console): a large one may then be stored compactly (the DynamoDB adapter deflates its
   * JSON). Leave it unset for a view that other systems read straight from the state table.
   */
  readonly compactState?: true;
  /**
   * True for the group that keeps every unsequenced message whole (the audit group): its record of
   * one is its inbox row, with the envelope, written by one conditional put instead of a state,
   * and `decide` is not asked. The trace finds those messages by correlation there (by task
   * through the task's stored events or failure records), and reads their payloads to find the
   * states of the other groups that recorded them. The group receives nothing else: its rules
   * match only unsequenced messages (ConsumerGroupProps.unsequencedOnly), since the event store
   * already holds every stored event, and the operator's rebuild refuses it (no stream to fold).
   */
  readonly keepsMessages?: true;
  /**
   * The role as a fold of its streams decides with it (the operator's rebuild and check), for a
   * role whose decision reads through a port: built with ports that answer what the group's
   * decision on the event recorded, never the outside world as it is now. Absent on a role whose
   * decision needs no port (it is its own fold) and on one whose decision calls the outside world.
   */
  foldWith?(recorded: RecordedDecision): Role<unknown>;
  /**
   * Where the role keeps a customer's words, or words written to one, in its states, and how such
   * a state reads once the customer is erased (functions/core/personal-data/erase.ts): `stateOf`
   * names its state of a conversation (no task) or of one of the conversation's turns (its task),
   * undefined where it keeps none; `erase` gives the state with each such text `[erased]`.
   */
  readonly personalState?: PersonalState<S>;
}

/** A turn of a conversation, or the conversation itself (no task). */
export interface ConversationPart {
  readonly conversationId: string;
  readonly taskId?: string;
}

export interface PersonalState<S> {
  stateOf(part: ConversationPart): AggregateRef | undefined;
  erase(state: S): S;
  /**
   * The stored texts (ContentStore references) the state refers to that hold personal data;
   * `content` reads what the state keeps there of its own references (an agent run's pages).
   */
  contentOf?(
    state: S,
    content: Pick<ContentStore, "getMany">,
  ): Promise<readonly string[]> | readonly string[];
}

/**
 * The decision part of a role: `decide` is the only place with business logic: it gets the
 * current state and one event and returns a decision. It may call models or tools (never inside a
 * transaction: the commit happens after it returns), and must not write anything itself.
 */
export interface RoleDecision<S> {
  /**
   * A reason to drop the event unprocessed (superseded, cancelled, ...); checked after expiry and
   * before `decide`. It may read (for example another aggregate's version) but must not write.
   */
  discard?(
    state: S | undefined,
    event: Envelope,
    now: Date,
  ): DiscardReason | undefined | Promise<DiscardReason | undefined>;
  /**
   * True when this event already started work that must be finished even though the event is
   * expired or discarded (a side effect whose outcome is not yet known): `decide` then runs with
   * `context.resolving`. Asked only for an event that would be discarded.
   */
  unfinished?(state: S | undefined, event: Envelope): boolean | Promise<boolean>;
  /**
   * The facts of an event the role's `discard` (or expiry) dropped, for a discard that others must
   * hear of (a turn that will get no reply): the returned decision commits with the event
   * recorded as discarded with `reason`, as `Decision.discarded` does; undefined = the record
   * alone. Asked only for an event that is discarded (not one with unfinished work). It may read,
   * but must not start what the discard spared (a model or a channel call).
   */
  discarded?(
    state: S | undefined,
    event: Envelope,
    reason: DiscardReason,
    context: DecideContext<S>,
  ): Decision<S> | undefined | Promise<Decision<S> | undefined>;
  decide(
    state: S | undefined,
    event: Envelope,
    context: DecideContext<S>,
  ): Decision<S> | Promise<Decision<S>>;
  /**
   * The failure facts for an event this role failed on for good: `decide` threw a permanent error,
   * or any error on the delivery's last attempt (`ConsumeOptions.lastAttempt`). The returned
   * decision commits instead of the event going to the dead-letter queue, recorded as `rejected`
   * with the error's code, so projections and people see an outcome; undefined = no failure fact
   * (the error goes on to the queue: retry or dead letter). It must not call what failed again.
   */
  failed?(
    state: S | undefined,
    event: Envelope,
    failure: ErrorInfo,
    context: DecideContext<S>,
  ): Decision<S> | undefined;
  /**
   * What to publish periodically while `decide` works on `event`, delivered for the
   * `receiveCount`th time (the consumer handler sends it when its heartbeat is on); undefined =
   * nothing. Given the same event and count, it must name the same run as `decide` does.
   */
  heartbeat?(event: Envelope, receiveCount: number): HeartbeatSpec | undefined;
}

/** A consumer group's behaviour: who it is, how it stores, how it decides. */
export interface Role<S> extends RoleIdentity, RoleStorage<S>, RoleDecision<S> {}

/**
 * What a role is outside its handler: its identity and the storage facts the rest of AgentBus
 * reads of it. The topology subscribes the group with it, and the operator tools read the group's
 * outcomes from its states with it (lib/operator/recorded-outcomes.ts); the role spreads the same
 * object, so all of them see the role's own `stateOf`.
 */
export type RoleDescriptor = RoleIdentity &
  Pick<
    RoleStorage<unknown>,
    "stateOf" | "unordered" | "sharedStreams" | "repeatableTypes" | "keepsMessages" | "foldWith"
  > & {
    // biome-ignore lint/suspicious/noExplicitAny: each role's own state type, read back by the erasure
    readonly personalState?: PersonalState<any>;
  };

export type StepStatus = "applied" | "duplicate" | "discarded" | "rejected";

export interface Step {
  readonly eventId: string;
  readonly eventType: string;
  readonly version: number;
  readonly status: StepStatus;
  readonly reason?: string;
  /** True when the event came from the event store to repair a version gap. */
  readonly repaired: boolean;
  readonly emitted: readonly Envelope[];
  /**
   * Set when a replayed unsequenced message was discarded as `expired` because it is older than
   * the group's dedup horizon (./replay.ts).
   */
  readonly pastHorizon?: true;
}

export interface ConsumeResult {
  /** The delivered event. */
  readonly event: Envelope;
  /** What happened to the delivered event. */
  readonly status: StepStatus;
  readonly reason?: string;
  /** Every event handled for this delivery, gap repairs first, in order. */
  readonly steps: readonly Step[];
}

export interface ConsumeOptions {
  readonly receiveCount?: number;
  /**
   * How long inbox rows are kept; at least twice the longest redelivery window. It is also the
   * group's dedup horizon for replayed unsequenced messages (./replay.ts).
   */
  readonly inboxTtlSeconds?: number;
  /**
   * How long a group that keeps messages (RoleStorage.keepsMessages) keeps one that is not a
   * heartbeat. @default the `auditMessages` retention of ./retention (30 days)
   */
  readonly keptMessageTtlSeconds?: number;
  /** Set when the message comes from an archive replay (its body carried `replay-name`). */
  readonly replay?: ReplayMark;
  /**
   * True when the queue will not hand this message out again after this attempt (its receive
   * count reached the queue's maxReceiveCount): a role's `failed` then turns any error of
   * `decide` into failure facts.
   */
  readonly lastAttempt?: boolean;
  /** Reload-and-decide-again rounds after a version conflict before giving up (transiently). */
  readonly maxConflictRetries?: number;
}
