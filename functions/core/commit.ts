import type { AggregateRef, Envelope } from "../../schemas";
import { recordsAfter, spilledFrom, withoutForgotten } from "./gate-records";
import { isoTime } from "./iso-time";
import { listingAfter } from "./listing";
import type {
  CommitRequest,
  DiscardReason,
  GateRecords,
  InboxRecord,
  RecordedOutcome,
  StoredState,
  StreamHead,
} from "./ports";
import { retentionSeconds } from "./retention";
import type { Decision, Role, Step } from "./role";

/**
 * What handling one event writes (./apply decides what happens to it): the state with its gate
 * records (./gate-records) or the gate records alone, the checkpoint row of a shared stream, the
 * emitted events, and an inbox row where nothing else records the outcome, as one CommitRequest,
 * with the state once it commits. An applied event is recorded by the gate records (its stream's
 * checkpoint, or its id among the recent ones) or the checkpoint row, so it needs no row: a
 * commit that emits nothing is one conditional write of one item.
 */

export function refOf(event: Envelope): AggregateRef {
  return { type: event.aggregate.type, id: event.aggregate.id };
}

export function duplicateStep(event: Envelope): Step {
  return {
    eventId: event.event_id,
    eventType: event.event_type,
    version: event.aggregate.version,
    status: "duplicate",
    repaired: false,
    emitted: [],
  };
}

export interface CommitBase {
  readonly group: string;
  readonly event: Envelope;
  readonly now: Date;
  readonly ttl: number;
  /** The stream whose checkpoint on the state the event moves; undefined otherwise. */
  readonly stream: AggregateRef | undefined;
  /** The group's checkpoint row of a shared stream, moved by the event. */
  readonly row: CommitRequest["checkpoint"];
  /**
   * The group keeps this unsequenced message whole in its inbox row (Role.keepsMessages): no
   * state or gate record is written for it.
   */
  readonly keepsMessage?: true;
  /** With `keepsMessage`: when the group's row of the message expires (epoch seconds). */
  readonly keptUntil?: number;
  /**
   * The message is of a type the role applies idempotently (Role.repeatableTypes): no gate
   * record keeps its id, and applied it needs no inbox row either.
   */
  readonly repeatable?: true;
}

export interface Handled<S> {
  readonly commit: CommitRequest;
  readonly step: Step;
  /** The aggregate's state once the commit succeeds. */
  readonly state: StoredState<S> | undefined;
}

/** The commit of a decision: the state with its gate records and the events it emits. */
export function decided<S>(
  base: CommitBase,
  state: StoredState<S> | undefined,
  stateRef: AggregateRef,
  role: Role<S>,
  decision: Decision<S>,
  step: Step & { readonly status: RecordedOutcome },
): Handled<S> {
  const { emitted, status, reason, repaired } = step;
  const next = decision.state !== undefined ? decision.state : state?.data;
  const moved = withoutForgotten(gateAfter(base, state), state?.gate, forgetsOf(role, next));
  const gate = moved ?? state?.gate;
  const write = stateWrite(base, decision, state, stateRef, emitted.length, role, gate);
  const inbox = inboxRow(base, status, reason, repaired);
  if (!write) return gateOnly(base, state, stateRef, inbox, step, recordsItself(base, step), moved);
  return {
    commit: {
      inbox,
      recordedByState: recordsItself(base, step) ? true : undefined,
      checkpoint: base.row,
      state: write,
      append: emitted.length > 0 ? emitted : undefined,
      spill: spillOf(base, state?.gate, gate),
    },
    step,
    state: {
      aggregate: stateRef,
      revision: (state?.revision ?? 0) + 1,
      version: write.version,
      data: write.next as S,
      gate,
      listing: write.listing,
      ...streamHeadAfter(state, emitted),
    },
  };
}

/** Whether the state as the commit leaves it forgets a stream (Role.forgets); undefined: none. */
function forgetsOf<S>(role: Pick<Role<S>, "forgets">, state: S | null | undefined) {
  if (!role.forgets || state === undefined || state === null) return undefined;
  return (stream: AggregateRef) => role.forgets?.(state, stream) === true;
}

/**
 * The stream head a store keeps with the state a commit writes: the last event the commit appends
 * to the state's stream, when it is at the state's new version; else the head the commit carries
 * over, when it names that version; else none (not known).
 */
export function storedStreamHead(request: CommitRequest): StreamHead | undefined {
  const state = request.state;
  if (!state) return undefined;
  const last = request.append?.at(-1);
  if (
    last &&
    last.aggregate.type === state.aggregate.type &&
    last.aggregate.id === state.aggregate.id
  )
    return last.aggregate.version === state.version ? headOf(last) : undefined;
  return state.streamHead?.version === state.version ? state.streamHead : undefined;
}

/** The stream head an event makes. */
function headOf(event: Envelope): StreamHead {
  return {
    version: event.aggregate.version,
    correlation: event.correlation_id,
    task: event.task_id,
  };
}

/** The stream head once the commit appended `emitted` (the last of them, or the head before). */
function streamHeadAfter(
  state: StoredState | undefined,
  emitted: readonly Envelope[],
): Pick<StoredState, "streamHead"> {
  const last = emitted.at(-1);
  if (last) return { streamHead: headOf(last) };
  return state?.streamHead ? { streamHead: state.streamHead } : {};
}

/**
 * A commit that leaves the state as it is: the inbox row, the checkpoint row of a shared stream,
 * and the stream's checkpoint on the state with the revision that guards it.
 */
function gateOnly<S>(
  base: CommitBase,
  state: StoredState<S> | undefined,
  stateRef: AggregateRef,
  inbox: InboxRecord,
  step: Step,
  recorded: boolean,
  gate: GateRecords | undefined,
): Handled<S> {
  // An unsequenced event's id joins the recent ones even when nothing else changes: they are the
  // group's one record of it, which a later commit that applies it must see (unless its role
  // applies its type idempotently: then nothing records it, and nothing may be left to write).
  // `gate`: the records once the event is handled, undefined when they do not change.
  const commit: CommitRequest = {
    inbox,
    recordedByState: recorded ? true : undefined,
    checkpoint: base.row,
  };
  if (!gate) return { commit, step, state };
  return {
    commit: {
      ...commit,
      gate: {
        aggregate: stateRef,
        expectedRevision: state?.revision ?? 0,
        records: gate,
        expiresAt: bareUntil(state, gate),
      },
      spill: spillOf(base, state?.gate, gate),
    },
    step,
    state: state
      ? { ...state, revision: state.revision + 1, gate }
      : { aggregate: stateRef, revision: 1, version: 0, data: undefined as S, gate },
  };
}

/**
 * True when what the commit writes records the event's outcome itself, so no inbox row is
 * written: the checkpoint of the event's stream on the state, the group's checkpoint row of a
 * shared stream, or the event's id among the state's recent unsequenced ones. The operator tools
 * read those as the group's outcomes (lib/operator/recorded-outcomes.ts); the group that keeps
 * messages (Role.keepsMessages) is where a trace finds an unsequenced one. A message of a type the
 * role applies idempotently (Role.repeatableTypes) is recorded nowhere: a duplicate is decided
 * again, and a commit of it that changes no state writes nothing at all. Repairs, discards and
 * rejections keep their rows (a trace shows what they were).
 */
function recordsItself(base: CommitBase, step: Pick<Step, "status" | "repaired">): boolean {
  return step.status === "applied" && !step.repaired && base.keepsMessage !== true;
}

/**
 * When an item that would hold nothing but these records may go: the last expiry of its recent
 * ids, when it has no data and no checkpoint (a message to an aggregate that has no state, which
 * would otherwise stay in the table for good); undefined for any other item.
 */
function bareUntil(state: StoredState | undefined, gate: GateRecords): number | undefined {
  if (state && (state.data !== undefined || state.version !== 0)) return undefined;
  for (const _ in gate.checkpoints) return undefined;
  let until: number | undefined;
  for (const id in gate.recent) until = Math.max(until ?? 0, gate.recent[id] ?? 0);
  return until;
}

/** The ids the commit's gate records spill (./gate-records), as the commit's `spill` part. */
function spillOf(
  base: CommitBase,
  before: GateRecords | undefined,
  after: GateRecords | undefined,
): CommitRequest["spill"] {
  // Only an unsequenced id can spill: a stream's checkpoint leaves `recent` as it was.
  if (!after || !before || after.recent === before.recent) return undefined;
  const ids = spilledFrom(before.recent, after.recent, base.now.getTime() / 1000);
  return ids.length > 0 ? { group: base.group, ids } : undefined;
}

/** The state's gate records once the event is handled; undefined when unchanged. */
function gateAfter(base: CommitBase, state: StoredState | undefined): GateRecords | undefined {
  return recordsAfter(state?.gate, {
    event: base.event,
    stream: base.stream,
    byId:
      base.stream === undefined &&
      base.row === undefined &&
      base.keepsMessage !== true &&
      base.repeatable !== true,
    now: base.now.getTime() / 1000,
    expiresAt: expiresAtOf(base),
  });
}

function expiresAtOf(base: CommitBase): number {
  return Math.floor(base.now.getTime() / 1000) + base.ttl;
}

/**
 * Until when a group that keeps messages (Role.keepsMessages) keeps one received `now`, in epoch
 * seconds: a heartbeat (its type's `heartbeat`) a day, any other message `messageTtlSeconds`
 * (30 days by default; ./retention). Its row is its only copy, so the message is gone from the
 * trace then too.
 */
export function keptUntil(
  now: Date,
  heartbeat: boolean,
  messageTtlSeconds = retentionSeconds("auditMessages"),
): number {
  const ttl = heartbeat ? retentionSeconds("heartbeats") : messageTtlSeconds;
  return Math.floor(now.getTime() / 1000) + ttl;
}

/**
 * The message kept whole by the group that keeps messages (Role.keepsMessages): its inbox row,
 * with the envelope, until `keptUntil`, put if absent. No state is read or written for it.
 */
export function kept<S>(base: CommitBase): Handled<S> {
  const inbox = outcomeRecord(base.group, base.event, "applied", {
    recordedAt: isoTime(base.now),
    expiresAt: base.keptUntil ?? expiresAtOf(base),
  });
  return {
    commit: { inbox: { ...inbox, envelope: base.event } },
    step: { ...duplicateStep(base.event), status: "applied", emitted: [] },
    state: undefined,
  };
}

/** The event recorded as discarded with its reason; the state is left as it is. */
export function discarded<S>(
  base: CommitBase,
  state: StoredState<S> | undefined,
  stateRef: AggregateRef,
  reason: DiscardReason,
  repaired: boolean,
  pastHorizon?: true,
): Handled<S> {
  const step: Step = {
    ...duplicateStep(base.event),
    status: "discarded",
    reason,
    repaired,
    ...(pastHorizon ? { pastHorizon } : {}),
  };
  const inbox = inboxRow(base, "discarded", reason, repaired);
  return gateOnly(base, state, stateRef, inbox, step, false, gateAfter(base, state));
}

function stateWrite<S>(
  base: CommitBase,
  decision: Decision<S>,
  state: StoredState<S> | undefined,
  stateRef: AggregateRef,
  emitted: number,
  role: Pick<Role<S>, "summarize" | "compactState">,
  gate: GateRecords | undefined,
): CommitRequest["state"] {
  if (decision.state === undefined && emitted === 0) return undefined;
  const next = decision.state !== undefined ? decision.state : (state?.data ?? null);
  const summary = next === null || !role.summarize ? undefined : role.summarize(next as S);
  return {
    aggregate: stateRef,
    expectedRevision: state?.revision ?? 0,
    next,
    version: (state?.version ?? 0) + emitted,
    dueAt: decision.dueAt ?? null,
    summary,
    listing: summary && listingAfter(state?.listing, summary, base.now),
    gate,
    compact: role.compactState,
    ...(state?.streamHead ? { streamHead: state.streamHead } : {}),
  };
}

function inboxRow(
  base: CommitBase,
  outcome: "applied" | "discarded" | "rejected",
  reason: string | undefined,
  repaired: boolean,
): InboxRecord {
  return outcomeRecord(base.group, base.event, outcome, {
    recordedAt: isoTime(base.now),
    // A kept message's row, discarded or not, goes when the group would have kept it.
    expiresAt: base.keptUntil ?? expiresAtOf(base),
    reason,
    repaired: repaired ? true : undefined,
  });
}

/** The facts of an event an outcome record carries: its envelope's, or a record made of them. */
export type RecordedEvent = Pick<
  Envelope,
  | "event_id"
  | "event_type"
  | "correlation_id"
  | "task_id"
  | "causation_id"
  | "producer"
  | "occurred_at"
> & {
  readonly aggregate: { readonly type: string; readonly id: string; readonly version: number };
};

/** A group's outcome of an event, as its inbox row records it. */
export function outcomeRecord(
  group: string,
  event: RecordedEvent,
  outcome: InboxRecord["outcome"],
  recorded: Pick<InboxRecord, "recordedAt" | "expiresAt" | "reason" | "repaired">,
): InboxRecord {
  const { reason, repaired, recordedAt, expiresAt } = recorded;
  return {
    group,
    eventId: event.event_id,
    eventType: event.event_type,
    outcome,
    aggregate: { type: event.aggregate.type, id: event.aggregate.id },
    version: event.aggregate.version,
    correlationId: event.correlation_id,
    taskId: event.task_id,
    producer: event.producer,
    occurredAt: event.occurred_at,
    recordedAt,
    expiresAt,
    ...(reason ? { reason } : {}),
    ...(event.causation_id ? { causationId: event.causation_id } : {}),
    ...(repaired ? { repaired } : {}),
  };
}

/** A record's fields writable, to fill its optional ones one by one. */
export type Mutable<T> = { -readonly [K in keyof T]: T[K] };
