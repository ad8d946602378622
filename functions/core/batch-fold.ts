import type { AggregateRef, Envelope } from "../../schemas";
import { type Mutable, storedStreamHead } from "./commit";
import { VersionConflictError } from "./errors";
import { checkpointOn } from "./gate-records";
import { listingAfter } from "./listing";
import type {
  Clock,
  CommitRequest,
  EventStore,
  GateRecords,
  Loaded,
  LoadRequest,
  StoredState,
} from "./ports";

/**
 * A batch's writes to one aggregate folded into one: the store of a consumer that reads the
 * event store's stream in batches (`delivery: "stream"`: read models). Each record still goes
 * through the whole pipeline, alone and in order; only where its commit goes changes.
 *
 * - A commit that writes nothing but the state item it loaded (its data and gate records: what a
 *   role that emits nothing commits for an applied event; or its gate records alone, once a state
 *   of the aggregate is kept) is kept here, and the next load of that aggregate reads the state as
 *   it would read it from the store.
 * - `flush` writes each aggregate's last state once, conditional on the revision first read.
 * - Anything else (an append, an inbox row, a shared stream's checkpoint row, spilled ids, a load
 *   that reads a row or an unsequenced id) flushes what is kept first, then goes to the store as
 *   it came, so the store sees every write in the order the pipeline made it.
 *
 * DynamoDB bills a write by the whole item: a conversation's view, written by each of a turn's five
 * facts, costs five times its size when they come one by one, once when they come in one batch.
 * Nothing kept is durable until `flush`: the stream handler reports a batch whose flush failed
 * from its first record kept, and Lambda delivers those again; the gate records in the store,
 * which nothing moved, apply them again. Written by hand: it is the pipeline's own commit contract
 * (./ports CommitRequest), applied in memory as the in-memory store applies it (./memory.ts).
 */
export class BatchFoldingStore implements EventStore {
  private readonly kept = new Map<string, Kept>();
  /** Flushes that wrote something: the stream handler tells from it where durability begins. */
  flushes = 0;

  constructor(
    private readonly store: EventStore,
    private readonly clock: Clock,
  ) {}

  /** Whether a write is kept that no flush has made yet. */
  keeping(): boolean {
    return this.kept.size > 0;
  }

  async load(request: LoadRequest): Promise<Loaded> {
    const kept = this.kept.get(keyOf(request.state));
    if (!kept) return this.store.load(request);
    if (request.inbox || request.checkpoint?.row) {
      await this.flush();
      return this.store.load(request);
    }
    const { checkpoint } = request;
    return {
      inboxHit: false,
      checkpoint: checkpoint ? checkpointOn(kept.state.gate, checkpoint.stream) : 0,
      state: kept.state,
    };
  }

  readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]> {
    return this.store.readStream(stream, from, to);
  }

  async commit(request: CommitRequest): Promise<void> {
    const part = request.state ?? request.gate;
    const before = part && this.kept.get(keyOf(part.aggregate));
    // A write of the gate records alone keeps the item's data, which only a kept state holds here.
    if (!part || !keepable(request) || (request.gate && !before)) {
      await this.flush();
      return this.store.commit(request);
    }
    const key = keyOf(part.aggregate);
    // The first write of an aggregate is checked by the store, at the flush.
    if (before && part.expectedRevision !== before.state.revision)
      throw new VersionConflictError(
        "state",
        `${key} is at revision ${before.state.revision} in this batch, expected ${part.expectedRevision}`,
      );
    this.kept.set(key, {
      firstRevision: before?.firstRevision ?? part.expectedRevision,
      state: this.after(request, before?.state),
      write: merged(before?.write, request),
    });
  }

  /** Write what is kept, one commit per aggregate; kept again if one fails. */
  async flush(): Promise<void> {
    for (const [key, { firstRevision, write }] of this.kept) {
      await this.store.commit(withRevision(write, firstRevision));
      this.kept.delete(key);
      this.flushes++;
    }
  }

  /**
   * The state as the store will hold it once the batch's write of it is made: `request` applied
   * to `before`, at the revision that write leaves (the first one read, plus one), so a commit
   * that cannot be kept, made after that write, is conditional on what the table then holds.
   */
  private after(request: CommitRequest, before: StoredState | undefined): StoredState {
    const { state, gate } = request;
    const revision = before?.revision ?? ((state ?? gate)?.expectedRevision ?? 0) + 1;
    if (state) {
      const stored: Mutable<StoredState> = {
        aggregate: state.aggregate,
        revision,
        version: state.version,
        data: state.next,
      };
      if (state.gate) stored.gate = state.gate;
      if (state.summary)
        stored.listing = listingAfter(state.listing, state.summary, this.clock.now());
      const head = storedStreamHead(request);
      if (head) stored.streamHead = head;
      return stored;
    }
    // A gate write is kept only after a state (commit): `before` holds the item's data.
    return { ...(before as StoredState), revision, gate: gate?.records as GateRecords };
  }
}

interface Kept {
  /** The revision the store held when the batch first wrote the aggregate. */
  readonly firstRevision: number;
  /** The state as a load reads it now. */
  readonly state: StoredState;
  /** The one commit that writes it. */
  readonly write: CommitRequest;
}

const keyOf = (ref: AggregateRef) => `${ref.type}#${ref.id}`;

/**
 * A commit of the state item alone: no append, no inbox row (a row that only says what the
 * commit is for is not written: CommitRequest.recordedByState), no checkpoint row, no spill.
 */
function keepable(request: CommitRequest): boolean {
  return (
    !request.append?.length &&
    !request.checkpoint &&
    !request.spill &&
    (!request.inbox || request.recordedByState === true) &&
    !(request.state && request.gate)
  );
}

/**
 * The one commit that leaves the item as `later` does after `earlier`: the last state written,
 * with the last gate records (a gate write is kept only after a state write).
 */
function merged(earlier: CommitRequest | undefined, later: CommitRequest): CommitRequest {
  const state = later.state ?? (earlier?.state && { ...earlier.state, gate: later.gate?.records });
  return state ? { state } : later;
}

/** The commit conditional on the revision the store holds (the first one the batch read). */
function withRevision(write: CommitRequest, expectedRevision: number): CommitRequest {
  return write.state ? { state: { ...write.state, expectedRevision } } : write;
}
