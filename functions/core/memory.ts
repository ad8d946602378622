import type { AggregateRef, Envelope } from "../../schemas";
import { type Mutable, storedStreamHead } from "./commit";
import { DuplicateCommitError, PermanentError, VersionConflictError } from "./errors";
import { deepFreeze } from "./freeze";
import { checkpointOn, mayHaveSpilled } from "./gate-records";
import { listingAfter } from "./listing";
import type { Vault } from "./personal-data/vault";
import type {
  Clock,
  CommitRequest,
  DueReader,
  EventStore,
  FailureLog,
  FailureRecord,
  GroupEvent,
  GroupStream,
  InboxRecord,
  Loaded,
  LoadRequest,
  OutcomeRecord,
  StateListing,
  StateReader,
  StateSummary,
  StoredState,
  StreamHead,
  StreamLister,
  StreamPage,
  TraceReader,
} from "./ports";
import { withinRetention } from "./retention";
import { systemClock } from "./runtime";

const key = (ref: AggregateRef) => `${ref.type}#${ref.id}`;

/**
 * The `<type>#<id>` key of each aggregate, made once: a key built anew for every lookup is hashed
 * anew too, which cost more than the rest of a load. Grows with the aggregates the store holds.
 */
class RefKeys {
  private readonly byType = new Map<string, Map<string, string>>();
  // The last ref asked for: a commit asks for its state's key again after the load did.
  // (Its fields are compared too: a caller may have changed the object since.)
  private lastRef?: AggregateRef;
  private lastType = "";
  private lastId = "";
  private lastKey = "";
  of(ref: AggregateRef): string {
    if (ref === this.lastRef && ref.type === this.lastType && ref.id === this.lastId)
      return this.lastKey;
    let ids = this.byType.get(ref.type);
    if (!ids) {
      ids = new Map();
      this.byType.set(ref.type, ids);
    }
    let k = ids.get(ref.id);
    if (k === undefined) {
      k = key(ref);
      ids.set(ref.id, k);
    }
    this.lastRef = ref;
    this.lastType = ref.type;
    this.lastId = ref.id;
    this.lastKey = k;
    return k;
  }
}

const MAX_TRANSACTION_ACTIONS = 100;

/**
 * In-memory twin of the DynamoDB event store: same atomicity (all parts of a commit or none),
 * same conditions, same errors. Used by unit and property tests and by the benchmark.
 */
export class InMemoryEventStore
  implements EventStore, TraceReader, DueReader, StateReader, FailureLog, StreamLister
{
  readonly states = new Map<string, StoredState>();
  /** The due index: state key -> due time (ISO 8601), as the state table's by-due index. */
  readonly dueIndex = new Map<string, { aggregate: AggregateRef; dueAt: string }>();
  /** Summaries of summarized states (Role.summarize), as the state items' summary attributes. */
  readonly summaries = new Map<string, StateSummary>();
  readonly streams = new Map<string, Map<number, Envelope>>();
  readonly inbox = new Map<string, InboxRecord>();
  /**
   * Ids spilled from a state's recent ones (CommitRequest.spill), by `${group}#${eventId}`: epoch
   * seconds until which each counts, as the inbox table's spilled rows.
   */
  readonly spilledRows = new Map<string, number>();
  /** The groups' checkpoint rows of shared streams, by `${group}#${stream}`. */
  readonly checkpoints = new Map<string, number>();
  /** Failure records by `${group}#${eventId}`, as the inbox table's failure rows. */
  readonly failures = new Map<string, FailureRecord>();
  /** Every appended event in commit order (what a DynamoDB stream would carry). */
  readonly log: Envelope[] = [];
  commits = 0;
  private readonly keys = new RefKeys();

  /**
   * With a vault, the personal fields of what a commit appends or keeps are stored sealed and
   * opened on every read, as the functions' DynamoDB store does (`log` holds them sealed, as the
   * table's stream would).
   */
  constructor(
    private readonly clock: Clock = systemClock,
    private readonly vault?: Vault,
  ) {}

  async load(request: LoadRequest): Promise<Loaded> {
    const { inbox } = request;
    const state = inbox?.rowOnly ? undefined : this.states.get(this.keys.of(request.state));
    // Only the dedup check of an unsequenced event asks what time it is.
    const now = inbox ? this.clock.now().getTime() : 0;
    const recent = inbox ? state?.gate?.recent[inbox.eventId] : undefined;
    const recentLive = recent !== undefined && recent * 1000 > now;
    // The row is read when asked, or when the id may have been spilled from the recent ones.
    const readRow =
      inbox !== undefined &&
      (inbox.row === true || (!recentLive && mayHaveSpilled(state?.gate, now / 1000)));
    const rowKey = readRow ? `${inbox.group}#${inbox.eventId}` : "";
    const row = readRow ? this.inbox.get(rowKey) : undefined;
    const spilled = readRow ? this.spilledRows.get(rowKey) : undefined;
    const live =
      recentLive ||
      (row !== undefined && row.expiresAt * 1000 > now) ||
      (spilled !== undefined && spilled * 1000 > now);
    const { checkpoint: asked } = request;
    let checkpoint = 0;
    if (asked?.row) checkpoint = this.checkpoints.get(`${asked.group}#${key(asked.stream)}`) ?? 0;
    else if (asked) checkpoint = checkpointOn(state?.gate, asked.stream);
    return { inboxHit: live, checkpoint, state };
  }

  /** The version of `stream` last applied to the aggregate `holder` (0 when none). */
  checkpointOf(holder: AggregateRef, stream: AggregateRef): number {
    return checkpointOn(this.states.get(key(holder))?.gate, stream);
  }

  async readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]> {
    // Walks the stored events, never the range: `to` may be any number a message carries.
    const events = [...(this.streams.get(key(stream))?.values() ?? [])];
    return this.opened(
      events
        .filter((e) => e.aggregate.version >= from && e.aggregate.version <= to)
        .sort((x, y) => x.aggregate.version - y.aggregate.version),
    );
  }

  async commit(plain: CommitRequest): Promise<void> {
    const request = this.vault ? await this.vault.sealCommit(plain) : plain;
    // Check every condition first, then apply: nothing is written when one fails.
    this.checkShape(request);
    this.checkConditions(request);
    this.commits++;
    this.apply(request);
  }

  /** The same limits DynamoDB enforces on one transaction. */
  private checkShape(request: CommitRequest): void {
    const actions =
      (request.inbox && !request.recordedByState ? 1 : 0) +
      (request.checkpoint ? 1 : 0) +
      (request.gate ? 1 : 0) +
      (request.state ? 1 : 0) +
      (request.append?.length ?? 0) +
      (request.spill?.ids.length ?? 0);
    if (actions > MAX_TRANSACTION_ACTIONS) {
      throw new PermanentError(
        "dynamodb.transaction_too_large",
        `a commit of ${actions} actions exceeds ${MAX_TRANSACTION_ACTIONS}`,
      );
    }
    const append = request.append;
    if (
      append &&
      append.length > 1 &&
      new Set(append.map((e) => `${key(e.aggregate)}@${e.aggregate.version}`)).size !==
        append.length
    ) {
      throw new PermanentError(
        "dynamodb.validation",
        "a commit cannot write two events at the same stream version",
      );
    }
    const row = request.inbox && !request.recordedByState ? request.inbox : undefined;
    if (
      row &&
      request.spill?.group === row.group &&
      request.spill.ids.some((s) => s.eventId === row.eventId)
    )
      throw new PermanentError(
        "dynamodb.validation",
        "a commit cannot write an inbox row and spill the same id",
      );
  }

  private checkConditions(request: CommitRequest): void {
    if (request.inbox && !request.recordedByState) {
      const row = this.inbox.get(`${request.inbox.group}#${request.inbox.eventId}`);
      if (row && row.expiresAt * 1000 > this.clock.now().getTime())
        throw new DuplicateCommitError();
    }
    if (request.checkpoint) {
      const { group, stream, from } = request.checkpoint;
      const current = this.checkpoints.get(`${group}#${key(stream)}`) ?? 0;
      if (current !== from) {
        throw new VersionConflictError(
          "checkpoint",
          `checkpoint of ${group} on ${key(stream)} is ${current}, expected ${from}`,
        );
      }
    }
    for (const part of [request.state, request.gate]) {
      if (!part) continue;
      const current = this.states.get(this.keys.of(part.aggregate))?.revision ?? 0;
      if (current !== part.expectedRevision) {
        throw new VersionConflictError(
          "state",
          `${key(part.aggregate)} is at revision ${current}, expected ${part.expectedRevision}`,
        );
      }
    }
    for (const event of request.append ?? []) {
      if (this.streams.get(key(event.aggregate))?.has(event.aggregate.version)) {
        throw new VersionConflictError(
          "stream",
          `${key(event.aggregate)} already has version ${event.aggregate.version}`,
        );
      }
    }
  }

  private apply(request: CommitRequest): void {
    if (request.inbox && !request.recordedByState)
      this.inbox.set(`${request.inbox.group}#${request.inbox.eventId}`, deepFreeze(request.inbox));
    if (request.checkpoint) {
      const { group, stream, to } = request.checkpoint;
      this.checkpoints.set(`${group}#${key(stream)}`, to);
    }
    if (request.gate) this.applyGate(request.gate);
    if (request.state) this.applyState(request.state, storedStreamHead(request));
    for (const { eventId, expiresAt } of request.spill?.ids ?? [])
      this.spilledRows.set(`${request.spill?.group}#${eventId}`, expiresAt);
    for (const event of request.append ?? []) {
      const k = key(event.aggregate);
      if (!this.streams.has(k)) this.streams.set(k, new Map());
      const stored = deepFreeze(event);
      this.streams.get(k)?.set(event.aggregate.version, stored);
      this.log.push(stored);
    }
  }

  /** StateRewriter: the state's data written again, while its revision is the one read. */
  async rewriteState(state: StoredState, data: unknown): Promise<boolean> {
    const k = this.keys.of(state.aggregate);
    const current = this.states.get(k);
    if (!current || current.revision !== state.revision) return false;
    this.states.set(
      k,
      Object.freeze({ ...current, revision: current.revision + 1, data: deepFreeze(data) }),
    );
    return true;
  }

  private applyState(
    state: NonNullable<CommitRequest["state"]>,
    streamHead: StreamHead | undefined,
  ): void {
    const k = this.keys.of(state.aggregate);
    const previous = this.states.get(k);
    const stored: Mutable<StoredState> = {
      // The key says the aggregate is the same: the one stored before is kept.
      aggregate:
        previous?.aggregate ??
        Object.freeze({ type: state.aggregate.type, id: state.aggregate.id }),
      revision: (previous?.revision ?? 0) + 1,
      version: state.version,
      data: deepFreeze(state.next),
    };
    // The gate records are the pipeline's own, made anew for each commit and never changed:
    // frozen or not, nothing writes to them, and freezing their keyed records costs a commit more.
    if (state.gate) stored.gate = state.gate;
    if (state.summary) stored.listing = this.listingOf(state, previous);
    if (streamHead) stored.streamHead = Object.freeze({ ...streamHead });
    if (typeof state.dueAt === "string") stored.dueAt = state.dueAt;
    this.states.set(k, Object.freeze(stored));
    if (typeof state.dueAt === "string")
      this.dueIndex.set(k, { aggregate: { ...state.aggregate }, dueAt: state.dueAt });
    else this.dueIndex.delete(k);
    if (state.summary) this.summaries.set(k, deepFreeze(state.summary));
    else this.summaries.delete(k);
  }

  /**
   * The list keys stored with a summary, as the DynamoDB adapter writes them: the request's when
   * they match its summary, else as of now (functions/core/listing.ts).
   */
  private listingOf(
    { summary, listing }: NonNullable<CommitRequest["state"]>,
    previous: StoredState | undefined,
  ): StateListing | undefined {
    if (listing !== undefined && listing.waiting === summary?.waiting)
      return listing === previous?.listing ? listing : Object.freeze({ ...listing });
    const keys = listingAfter(listing, summary, this.clock.now());
    return keys && Object.freeze(keys);
  }

  /** Only the gate records and the revision change: data, due time, summary and listing are kept. */
  private applyGate({ aggregate, records }: NonNullable<CommitRequest["gate"]>): void {
    const k = this.keys.of(aggregate);
    const previous = this.states.get(k);
    const stored: Mutable<StoredState> = {
      aggregate: previous?.aggregate ?? Object.freeze({ type: aggregate.type, id: aggregate.id }),
      revision: (previous?.revision ?? 0) + 1,
      version: previous?.version ?? 0,
      data: previous?.data,
      gate: records,
    };
    if (previous?.listing) stored.listing = previous.listing;
    if (previous?.streamHead) stored.streamHead = previous.streamHead;
    if (previous?.dueAt) stored.dueAt = previous.dueAt;
    this.states.set(k, Object.freeze(stored));
  }

  async due(now: Date, limit: number): Promise<AggregateRef[]> {
    const cutoff = now.toISOString();
    return [...this.dueIndex.values()]
      .filter((entry) => entry.dueAt <= cutoff)
      .sort((a, b) => (a.dueAt < b.dueAt ? -1 : a.dueAt > b.dueAt ? 1 : 0))
      .slice(0, Math.max(0, limit))
      .map((entry) => ({ ...entry.aggregate }));
  }

  async loadStates(refs: readonly AggregateRef[]): Promise<StoredState[]> {
    return refs.flatMap((ref) => {
      const state = this.states.get(key(ref));
      return state ? [state] : [];
    });
  }

  async eventsByCorrelation(correlationId: string): Promise<Envelope[]> {
    return this.opened(
      this.log
        .filter((e) => e.correlation_id === correlationId)
        .sort((a, b) => a.event_id.localeCompare(b.event_id)),
    );
  }

  async eventsByTask(taskId: string): Promise<Envelope[]> {
    return this.opened(
      this.log
        .filter((e) => e.task_id === taskId)
        .sort((a, b) => a.event_id.localeCompare(b.event_id)),
    );
  }

  async inboxRecords(group: string, eventIds: readonly string[]): Promise<InboxRecord[]> {
    const now = this.clock.now();
    return this.openedRecords(
      eventIds.flatMap((id) => {
        const row = this.inbox.get(`${group}#${id}`);
        return row ? [withinRetention(row, now)] : [];
      }),
    );
  }

  /** Stored events as a reader sees them: their sealed fields opened (`[erased]` once erased). */
  opened(events: readonly Envelope[]): Promise<Envelope[]> {
    return this.vault ? this.vault.openAll(events) : Promise.resolve([...events]);
  }

  private openedRecords<R extends OutcomeRecord>(records: readonly R[]): Promise<R[]> {
    const vault = this.vault;
    return vault
      ? Promise.all(records.map((r) => vault.openRecord(r)))
      : Promise.resolve([...records]);
  }

  async streamsOfType(type: string, after?: string, limit = 100): Promise<StreamPage> {
    const ids = [...this.streams.keys()]
      .filter((k) => k.startsWith(`${type}#`) && (after === undefined || k > after))
      .sort()
      .slice(0, limit + 1);
    const page = ids.slice(0, limit);
    return {
      streams: page.map((k) => ({ type, id: k.slice(type.length + 1) })),
      ...(ids.length > limit ? { next: page.at(-1) } : {}),
    };
  }

  async record(failure: FailureRecord): Promise<void> {
    this.failures.set(`${failure.group}#${failure.eventId}`, failure);
  }

  async outcomesByCorrelation(correlationId: string): Promise<OutcomeRecord[]> {
    return this.openedRecords(this.outcomes((r) => r.correlationId === correlationId));
  }

  /** As the DynamoDB reader: the task's records in the correlations of its events and failures. */
  async outcomesByTask(taskId: string): Promise<OutcomeRecord[]> {
    const correlations = new Set([
      ...this.log.filter((e) => e.task_id === taskId).map((e) => e.correlation_id),
      ...[...this.failures.values()].filter((f) => f.taskId === taskId).map((f) => f.correlationId),
    ]);
    return this.openedRecords(
      this.outcomes((r) => r.taskId === taskId && correlations.has(r.correlationId)),
    );
  }

  async correlationOfEvent(eventId: string): Promise<string | undefined> {
    return this.log.find((e) => e.event_id === eventId)?.correlation_id;
  }

  async outcomesOfEvent(groups: readonly string[], eventId: string): Promise<OutcomeRecord[]> {
    return this.openedRecords(
      this.outcomes((r) => r.eventId === eventId && groups.includes(r.group)),
    );
  }

  async groupCheckpoints(keys: readonly GroupStream[]): Promise<number[]> {
    return keys.map((k) => this.checkpoints.get(`${k.group}#${key(k.stream)}`) ?? 0);
  }

  async spilled(keys: readonly GroupEvent[]): Promise<boolean[]> {
    const now = this.clock.now().getTime();
    return keys.map((k) => (this.spilledRows.get(`${k.group}#${k.eventId}`) ?? 0) * 1000 > now);
  }

  private outcomes(match: (r: OutcomeRecord) => boolean): OutcomeRecord[] {
    const now = this.clock.now();
    return [...this.inbox.values(), ...this.failures.values()]
      .filter(match)
      .map((r) => withinRetention(r, now));
  }
}
