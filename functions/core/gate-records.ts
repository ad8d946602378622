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
  if (move.stream)
    return {
      ...current,
      checkpoints: {
        ...current.checkpoints,
        [streamOf(move.stream)]: move.event.aggregate.version,
      },
    };
  if (!move.byId) return undefined;
  const recent = withRecent(current.recent, move);
  const spilled = spilledFrom(current.recent, recent, move.now);
  const until = Math.max(current.spilledUntil ?? 0, ...spilled.map((s) => s.expiresAt));
  return {
    checkpoints: current.checkpoints,
    recent,
    // Kept only while a spilled id may still count.
    ...(until > move.now ? { spilledUntil: until } : {}),
  };
}

/** The ids `after` left out of `before` while they still count: each needs an inbox row. */
export function spilledFrom(
  before: GateRecords["recent"] | undefined,
  after: GateRecords["recent"],
  now: number,
): { eventId: string; expiresAt: number }[] {
  return Object.entries(before ?? {})
    .filter(([id, expiresAt]) => expiresAt > now && !(id in after))
    .map(([eventId, expiresAt]) => ({ eventId, expiresAt }));
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
  const kept = Object.entries(recent).filter(([other, at]) => at > move.now && other !== id);
  if (kept.length >= RECENT_IDS_KEPT) kept.sort((a, b) => b[1] - a[1]).length = RECENT_IDS_KEPT - 1;
  kept.push([id, move.expiresAt]);
  return Object.fromEntries(kept);
}

function streamOf(ref: AggregateRef): string {
  return `${ref.type}#${ref.id}`;
}
