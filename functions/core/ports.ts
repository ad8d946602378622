import type { AggregateRef, Envelope, EventRegistry, Topic } from "../../schemas";

/**
 * Ports: what the core needs from the outside world. Each has a DynamoDB/SQS/EventBridge adapter
 * in functions/adapters and an in-memory twin in ./memory.ts that honours the same error contract
 * (DuplicateCommitError, VersionConflictError, TransientError for throttling and outages).
 */

export interface Clock {
  now(): Date;
}

export interface IdSource {
  /**
   * A new ULID, monotonic within the process. Given the correlation of the stored event it is the
   * id of, an id that carries that correlation's digest (./event-ids.ts), which a trace by the id
   * reads; a source that ignores it mints ids the events table indexes by id instead.
   */
  next(correlationId?: string): string;
}

/** One aggregate's current state: `revision` guards every write, `version` is its stream head. */
export interface StoredState<S = unknown> {
  readonly aggregate: AggregateRef;
  readonly revision: number;
  readonly version: number;
  readonly data: S;
  /** The due time in the due index (Decision.dueAt, as the last commit wrote it). */
  readonly dueAt?: string;
  /** The consumer group's dedup and version-gate records, kept on the item they guard. */
  readonly gate?: GateRecords;
  /** Where the operator's lists have the state (./listing); absent when it is not listed. */
  readonly listing?: StateListing;
  /**
   * The correlation and task of the aggregate's stream at its head (`version`), where the store
   * records them: a commit carries them over (CommitRequest.state.streamHead) so the store can
   * tell whether the next event appended continues the same correlation and task, which its trace
   * indexes use.
   */
  readonly streamHead?: StreamHead;
}

/** The correlation and task of a stream's event at one version. */
export interface StreamHead {
  readonly version: number;
  readonly correlation: string;
  readonly task: string;
}

/**
 * The keys of a summarized state's entries in the operator's lists: when it was first summarized
 * and, while it waits for a person, what for and since when. They change only when the state
 * enters a list or moves to another, so the lists' indexes are written that rarely.
 */
export interface StateListing {
  /** When the state was first summarized (ISO 8601). */
  readonly listedAt: string;
  /** StateSummary.waiting, as of `waitingSince`. */
  readonly waiting?: string;
  /** Since when the state has waited for `waiting` (ISO 8601); set with it. */
  readonly waitingSince?: string;
}

/**
 * What a consumer group knows about the events it applied to one of its aggregates, stored with
 * that aggregate's state so one read and one conditional write serve the state, the version gate
 * and the dedup check. A state aggregate belongs to one group.
 */
export interface GateRecords {
  /** Last version of each stream (`<type>#<id>`) whose events were applied to this aggregate. */
  readonly checkpoints: Readonly<Record<string, number>>;
  /**
   * Unsequenced event ids handled here -> epoch seconds until which they count (the inbox's time
   * to live). They are the group's record of those messages: a duplicate is found by the state
   * read, and a commit that applies one writes no inbox row. Bounded (./gate-records): an id that
   * must leave while it still counts is spilled into an inbox row of its own in the same commit.
   */
  readonly recent: Readonly<Record<string, number>>;
  /**
   * Epoch seconds until which an id spilled from `recent` may still count: until then an id not
   * in `recent` is also looked up in the inbox. Absent when none was spilled.
   */
  readonly spilledUntil?: number;
}

/** A state's place in the operator's lists (see Role.summarize in ./pipeline). */
export interface StateSummary {
  readonly kind: string;
  readonly status: string;
  readonly label?: string;
  readonly waiting?: string;
  readonly counts?: Readonly<Record<string, number>>;
  /** The tenant the state belongs to, for a role that records one (absent: the default tenant). */
  readonly tenant?: string;
}

export type DiscardReason = "expired" | "superseded" | "cancelled" | "invalidated_by_state_change";
export type RecordedOutcome = "applied" | "discarded" | "rejected";

/** What a consumer group records about one event it has handled (the inbox row). */
export interface InboxRecord {
  readonly group: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly outcome: RecordedOutcome;
  readonly reason?: string;
  readonly aggregate: AggregateRef;
  readonly version: number;
  readonly correlationId: string;
  readonly taskId: string;
  /** The event's cause, producer and time, so a trace can place messages no stream holds. */
  readonly causationId?: string;
  readonly producer: string;
  readonly occurredAt: string;
  /** True when the group read the event from the event store to fill a gap. */
  readonly repaired?: true;
  readonly recordedAt: string;
  /**
   * Epoch seconds after which the row may be deleted by TTL and must be ignored on read;
   * `Number.MAX_SAFE_INTEGER` for a row that never expires (a message kept whole before kept
   * messages expired).
   */
  readonly expiresAt: number;
  /**
   * The message itself, kept by a group that keeps the messages no stream holds
   * (Role.keepsMessages): the trace reads their payloads to find the states that applied them.
   * Read without it once the row has expired (./retention `withinRetention`).
   */
  readonly envelope?: Envelope;
}

/**
 * What a consumer group records about an event it failed on: still retrying (with the last error)
 * or dead-lettered. Kept beside the inbox rows, findable by correlation and task like them.
 */
export interface FailureRecord extends Omit<InboxRecord, "outcome" | "reason"> {
  readonly outcome: "retrying" | "dead-lettered";
  readonly error: { readonly code: string; readonly message: string };
  /** How many times the queue had handed the message out. */
  readonly attempts: number;
}

/** Every outcome a group recorded: an inbox row or a failure record. */
export type OutcomeRecord = InboxRecord | FailureRecord;

/** Records failures for tracing; best effort (a lost record never changes a message's fate). */
export interface FailureLog {
  record(failure: FailureRecord): Promise<void>;
}

/**
 * What to read before deciding: the state item, which holds the group's gate records. The
 * DynamoDB adapter reads it with one strongly consistent GetItem.
 */
export interface LoadRequest {
  /**
   * Has the group applied this unsequenced event id? Answered from the state's recent ids; with
   * `row`, the inbox row is read as well (after a commit found it there).
   */
  readonly inbox?: {
    readonly group: string;
    readonly eventId: string;
    readonly row?: boolean;
    /**
     * The group keeps this message in its inbox row alone (Role.keepsMessages): the row is read
     * instead of the state, which is not read at all.
     */
    readonly rowOnly?: boolean;
  };
  /**
   * Which version of this stream has the group applied last to `state`? With `row`, the stream is
   * shared by several of the group's aggregates (Role.sharedStreams): its checkpoint is the
   * group's own row, read with the state item.
   */
  readonly checkpoint?: {
    readonly group: string;
    readonly stream: AggregateRef;
    readonly row?: boolean;
  };
  /** The aggregate the caller reads and writes. */
  readonly state: AggregateRef;
}

export interface Loaded {
  /** False when the inbox was not asked for. */
  readonly inboxHit: boolean;
  /** Last applied version of the asked-for stream (0 when none or not asked). */
  readonly checkpoint: number;
  readonly state: StoredState | undefined;
}

/**
 * One atomic commit. All parts succeed or none does:
 * - `inbox`: put if absent (else DuplicateCommitError);
 * - `checkpoint`: the group's row of a shared stream, moved from `from` to `to` (else
 *   VersionConflictError "checkpoint");
 * - `state`: write `next` and its gate records if the stored revision equals `expectedRevision`
 *   (0 = must not exist) (else VersionConflictError "state");
 * - `gate`: instead of `state`, only the gate records and the revision change (same condition);
 *   the stored data, version, due time and summary are kept;
 * - `append`: put each event at its version if absent (else VersionConflictError "stream").
 */
export interface CommitRequest {
  readonly inbox?: InboxRecord;
  /**
   * What this commit writes records the event's outcome itself (a stream checkpoint, on the
   * state or in a shared stream's row, or an unordered role's record it creates), or nothing
   * needs to (a message its role applies idempotently: Role.repeatableTypes): `inbox` says what
   * the commit is for but is neither written as a row nor checked.
   */
  readonly recordedByState?: true;
  readonly checkpoint?: {
    readonly group: string;
    readonly stream: AggregateRef;
    readonly from: number;
    readonly to: number;
  };
  readonly gate?: {
    readonly aggregate: AggregateRef;
    readonly expectedRevision: number;
    readonly records: GateRecords;
    /**
     * Set when the item holds nothing but unsequenced ids (no data, no checkpoint: messages to an
     * aggregate that has no state): epoch seconds when the last of them expires, after which the
     * item may be deleted. Absent, the item is kept.
     */
    readonly expiresAt?: number;
  };
  readonly state?: {
    readonly aggregate: AggregateRef;
    readonly expectedRevision: number;
    readonly next: unknown;
    /** Stream head after this commit. */
    readonly version: number;
    /** When the aggregate next needs a sweeper (ISO 8601); null or absent = not due. */
    readonly dueAt?: string | null;
    /** Where the operator's lists find this state (Role.summarize); absent = not listed. */
    readonly summary?: StateSummary;
    /** The summary's list keys (./listing); set with `summary`. */
    readonly listing?: StateListing;
    /** The group's gate records after this commit; absent = none kept. */
    readonly gate?: GateRecords;
    /** The state may be stored compactly: only AgentBus reads it (Role.compactState). */
    readonly compact?: true;
    /**
     * The stream head as loaded (StoredState.streamHead), carried over; the store trusts it only
     * at the version it names. Absent: the store does not know it, which costs the store's trace
     * index an entry at most.
     */
    readonly streamHead?: StreamHead;
  };
  readonly append?: readonly Envelope[];
  /**
   * Unsequenced ids that left the state's recent ones while they still count (GateRecords): each
   * is written as an inbox row of `group` that expires when the id would have (without a
   * condition, keeping what a row of the id already says).
   */
  readonly spill?: {
    readonly group: string;
    readonly ids: readonly { readonly eventId: string; readonly expiresAt: number }[];
  };
}

export interface EventStore {
  load(request: LoadRequest): Promise<Loaded>;
  /** Events of one stream with from <= version <= to, in version order (missing ones absent). */
  readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]>;
  commit(request: CommitRequest): Promise<void>;
}

/**
 * What a consumer group's decision on one event left in the event store, for folding its streams
 * again (the operator's rebuild and check) without asking the outside world a second time.
 */
export interface RecordedDecision {
  /** The events the decision appended to the group's own stream (caused by the event), in order. */
  readonly emitted: readonly Envelope[];
  /** Reads a stream of the event store (read only). */
  readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]>;
}

/** The due index: aggregates whose state asked for a sweeper's attention (Decision.dueAt). */
export interface DueReader {
  /** Aggregates due at or before `now`, earliest first, at most `limit`. */
  due(now: Date, limit: number): Promise<AggregateRef[]>;
}

/** Reads the current states of several aggregates (missing ones left out). */
export interface StateReader {
  loadStates(refs: readonly AggregateRef[]): Promise<StoredState[]>;
}

/** One page of the streams of an aggregate type, and where the next page starts. */
export interface StreamPage {
  readonly streams: readonly AggregateRef[];
  /** Opaque; absent on the last page. */
  readonly next?: string;
}

/** Lists every stream of an aggregate type (for rebuilding a projection from the event store). */
export interface StreamLister {
  streamsOfType(type: string, after?: string, limit?: number): Promise<StreamPage>;
}

/** Read side used by tracing tools. */
export interface TraceReader {
  /** Stored stream events of a correlation / task, in event id order. */
  eventsByCorrelation(correlationId: string): Promise<Envelope[]>;
  eventsByTask(taskId: string): Promise<Envelope[]>;
  inboxRecords(group: string, eventIds: readonly string[]): Promise<InboxRecord[]>;
  /**
   * Every group's recorded outcomes (inbox rows and failure records) of a correlation / task. A
   * task's are those of the correlations its stored events or its failure records are in: the
   * row of a message that stored no event is found by its task only there.
   */
  outcomesByCorrelation(correlationId: string): Promise<OutcomeRecord[]>;
  outcomesByTask(taskId: string): Promise<OutcomeRecord[]>;
  /** What the given groups recorded of one event id (to find the trace an event belongs to). */
  outcomesOfEvent(groups: readonly string[], eventId: string): Promise<OutcomeRecord[]>;
  /** The correlation of the stored event with this id; undefined when none is stored. */
  correlationOfEvent(eventId: string): Promise<string | undefined>;
  /** Each group's checkpoint row of a shared stream (Role.sharedStreams), 0 where it has none. */
  groupCheckpoints(keys: readonly GroupStream[]): Promise<number[]>;
  /**
   * Whether each group keeps a live row of the unsequenced id spilled from a state's recent ones
   * (CommitRequest.spill): the group's record of the message once its state no longer holds it.
   */
  spilled(keys: readonly GroupEvent[]): Promise<boolean[]>;
}

/** A consumer group and one event id. */
export interface GroupEvent {
  readonly group: string;
  readonly eventId: string;
}

/** A consumer group and one stream it reads. */
export interface GroupStream {
  readonly group: string;
  readonly stream: AggregateRef;
}

export interface PublishFailure {
  readonly eventId: string;
  readonly code: string;
  readonly message: string;
}

/** Publishes at most 10 envelopes of one topic in one call (EventBridge PutEvents). */
export interface EventPublisher {
  publish(topic: Topic, envelopes: readonly Envelope[]): Promise<PublishFailure[]>;
}

export interface FifoMessage {
  /** Batch entry id (unique within the call). */
  readonly id: string;
  readonly groupId: string;
  readonly deduplicationId: string;
  readonly body: string;
}

/** Sends at most 10 messages in one call (SQS SendMessageBatch); returns the failed entry ids. */
export interface FifoSender {
  send(messages: readonly FifoMessage[]): Promise<{ id: string; code: string; message: string }[]>;
}

/** Moves an unprocessable message straight to a dead-letter queue, with its reason. */
export interface DeadLetterSink {
  send(message: {
    body: string;
    code: string;
    reason: string;
    groupId?: string;
    deduplicationId?: string;
    receiveCount?: number;
  }): Promise<void>;
}

/** What opens a message's sealed personal fields: the function's vault (./personal-data). */
export interface PersonalFieldOpener {
  openFields(
    payload: Readonly<Record<string, unknown>>,
    fields: readonly string[],
    tenant: string,
  ): Promise<Record<string, unknown>>;
}

export interface ConsumerDeps {
  readonly store: EventStore;
  readonly registry: EventRegistry;
  readonly clock: Clock;
  readonly ids: IdSource;
  /**
   * Opens the sealed personal fields a role reads (Role.readsPersonal): the function's vault,
   * absent in a function given no customer keys (./personal-data/delivery.ts).
   */
  readonly personalData?: PersonalFieldOpener;
}
