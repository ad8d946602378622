import type { AggregateRef, Envelope } from "../../schemas";
import type { GateRecords } from "./ports";

/**
 * The gate records a state item keeps for its consumer group (./ports GateRecords): the
 * checkpoint of each stream whose events go to this aggregate alone, and the unsequenced ids
 * applied recently. Hand-written because they commit in the same conditional write as the state.
 */

/**
 * Unsequenced ids a state keeps: its record of the messages it handled. One more live id spills
 * the one that expires first into an inbox row (./commit), so a commit spills at most one.
 */
export const RECENT_IDS_KEPT = 32;

const EMPTY: GateRecords = { checkpoints: {}, recent: {} };

/**
 * A record keyed by stream keys or event ids, without a prototype. V8 keeps such an object as a
 * dictionary; an ordinary object would get a hidden class of its own for each new key, which
 * every state with its own stream or ids does (about 1 µs and a retained hidden class each).
 */
function keyed(from?: Readonly<Record<string, number>>): Record<string, number> {
  const record: Record<string, number> = Object.create(null);
  if (from) for (const k in from) record[k] = from[k] as number;
  return record;
}

/** How one handled event moves the records. */
export interface GateMove {
  readonly event: Envelope;
  /** The event's stream when its checkpoint is kept on the state; undefined otherwise. */
  readonly stream: AggregateRef | undefined;
  /** True when the event is unsequenced for the group (de-duplicated by id). */
  readonly byId: boolean;
  /** Epoch seconds: now, and until when the inbox keeps the event's row. */
  readonly now: number;
  readonly expiresAt: number;
}

/** The records once the event is handled; undefined when they do not change. */
export function recordsAfter(
  before: GateRecords | undefined,
  move: GateMove,
): GateRecords | undefined {
  const current = before ?? EMPTY;
  if (move.stream) {
    const checkpoints = keyed(current.checkpoints);
    checkpoints[streamOf(move.stream)] = move.event.aggregate.version;
    const { recent, spilledUntil } = current;
    return spilledUntil === undefined
      ? { checkpoints, recent }
      : { checkpoints, recent, spilledUntil };
  }
  if (!move.byId) return undefined;
  const recent = withRecent(current.recent, move);
  let until = current.spilledUntil ?? 0;
  for (const s of spilledFrom(current.recent, recent, move.now))
    until = Math.max(until, s.expiresAt);
  // spilledUntil is kept only while a spilled id may still count.
  return until > move.now
    ? { checkpoints: current.checkpoints, recent, spilledUntil: until }
    : { checkpoints: current.checkpoints, recent };
}

/** The ids `after` left out of `before` while they still count: each needs an inbox row. */
export function spilledFrom(
  before: GateRecords["recent"] | undefined,
  after: GateRecords["recent"],
  now: number,
): { eventId: string; expiresAt: number }[] {
  const spilled: { eventId: string; expiresAt: number }[] = [];
  for (const eventId in before) {
    const expiresAt = before[eventId] as number;
    if (expiresAt > now && !(eventId in after)) spilled.push({ eventId, expiresAt });
  }
  return spilled;
}

/** True when the records say an id not in `recent` may still have a live inbox row. */
export function mayHaveSpilled(records: GateRecords | undefined, now: number): boolean {
  return (records?.spilledUntil ?? 0) > now;
}

/**
 * The live recent ids with this event's added: at most RECENT_IDS_KEPT, the event's own and the
 * others latest to expire. The event's id always stays (even among ids of the same second): a
 * commit never spills the id it records, which its own inbox row (a discard's) would also write.
 */
function withRecent(recent: GateRecords["recent"], move: GateMove): GateRecords["recent"] {
  const id = move.event.event_id;
  const kept: [string, number][] = [];
  for (const other in recent) {
    const at = recent[other] as number;
    if (at > move.now && other !== id) kept.push([other, at]);
  }
  if (kept.length >= RECENT_IDS_KEPT) kept.sort((a, b) => b[1] - a[1]).length = RECENT_IDS_KEPT - 1;
  const next = keyed();
  for (const [other, at] of kept) next[other] = at;
  next[id] = move.expiresAt;
  return next;
}

function streamOf(ref: AggregateRef): string {
  return `${ref.type}#${ref.id}`;
}

/** The last version of `stream` the records say was applied (0 when none). */
export function checkpointOn(records: GateRecords | undefined, stream: AggregateRef): number {
  return records?.checkpoints[streamOf(stream)] ?? 0;
}

/**
 * `after` without the checkpoints of the streams the state forgets (Role.forgets); undefined
 * when that leaves the records as `before` had them, so nothing is left to write.
 */
export function withoutForgotten(
  after: GateRecords | undefined,
  before: GateRecords | undefined,
  forgets: ((stream: AggregateRef) => boolean) | undefined,
): GateRecords | undefined {
  if (!after || !forgets) return after;
  let checkpoints: Record<string, number> | undefined;
  for (const key in after.checkpoints) {
    if (!forgets(streamRefOf(key))) continue;
    checkpoints ??= keyed(after.checkpoints);
    delete checkpoints[key];
  }
  if (!checkpoints) return after;
  const kept: GateRecords = { ...after, checkpoints };
  return before && sameRecords(kept, before) ? undefined : kept;
}

function sameRecords(a: GateRecords, b: GateRecords): boolean {
  return (
    a.recent === b.recent &&
    a.spilledUntil === b.spilledUntil &&
    sameEntries(a.checkpoints, b.checkpoints)
  );
}

function sameEntries(a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>) {
  let count = 0;
  for (const key in a) {
    if (b[key] !== a[key]) return false;
    count++;
  }
  for (const _ in b) count--;
  return count === 0;
}

/** The stream a checkpoint key (`streamOf`) names. */
function streamRefOf(key: string): AggregateRef {
  const at = key.indexOf("#");
  return { type: key.slice(0, at), id: key.slice(at + 1) };
}
