import type { AggregateRef, Envelope } from "../../schemas";
import { TransientError } from "./errors";
import type { ConsumerDeps, Loaded } from "./ports";

/** How many missing ranges a gap error names; the rest are only counted. */
const MAX_RANGES_REPORTED = 5;
/** A gap this long is read only once the version just before the delivered one is known stored. */
const LARGE_GAP = 1000;

/**
 * Dedup and version gate: the events to apply, in order, ending with `event`; [] = duplicate.
 * - unsequenced (`stream` undefined): a duplicate when the group recorded the event id (the
 *   state's recent ids, or the inbox row it was spilled into or kept in: `loaded.inboxHit`);
 * - v <= checkpoint: a duplicate or an old version;
 * - v = checkpoint + 1: apply;
 * - v > checkpoint + 1: the missing versions are read from the event store and applied first,
 *   each upcast to its type's newest schema version (as delivery does when it parses); unless the
 *   event begins a state that has none (`beginsState`, Role.beginsState): then it alone.
 * Its cost follows the events stored in the gap, never the size of the version number: a gap the
 * store cannot fill is reported by ranges and a count.
 */
export async function eventsToApply(
  event: Envelope,
  stream: AggregateRef | undefined,
  loaded: Loaded,
  deps: Pick<ConsumerDeps, "store" | "registry">,
  beginsState: (event: Envelope) => boolean = () => false,
): Promise<Envelope[]> {
  if (!stream) return loaded.inboxHit ? [] : [event];
  const version = event.aggregate.version;
  const last = loaded.checkpoint;
  if (version <= last) return [];
  if (version === last + 1) return [event];
  // A state's first event (Role.beginsState): nothing of the gap before it is that state's.
  if (last === 0 && loaded.state === undefined && beginsState(event)) return [event];
  return withGap(event, stream, last, deps);
}

/** The missing versions between the checkpoint `last` and the event, read from the store. */
async function withGap(
  event: Envelope,
  stream: AggregateRef,
  last: number,
  deps: Pick<ConsumerDeps, "store" | "registry">,
): Promise<Envelope[]> {
  const version = event.aggregate.version;
  const expected = version - 1 - last;
  if (expected > LARGE_GAP) await precedingStored(stream, last, version, deps);
  const gap = await deps.store.readStream(stream, last + 1, version - 1);
  if (gap.length !== expected) {
    const missing = missingRanges(gap, last + 1, version - 1);
    const named = missing.ranges.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(", ");
    const more = missing.ranges.length < missing.rangeCount ? ", ..." : "";
    throw new TransientError(
      "gate.gap_unrepairable",
      `${stream.type}#${stream.id}: version ${version} arrived after ${last}, and ${missing.count} version(s) are not in the event store: ${named}${more}`,
      { details: { stream, last, version, missingCount: missing.count, missing: missing.ranges } },
    );
  }
  // Stored events may be of an older schema version: the role sees each at its newest.
  return [...gap.map((stored) => deps.registry.upcast(stored)), event];
}

/**
 * Before reading a long gap, one read of the version just before the delivered one: a version far
 * beyond the stream's head (a message that lies about its position) then fails after one small
 * read instead of a read of everything stored after the checkpoint.
 */
async function precedingStored(
  stream: AggregateRef,
  last: number,
  version: number,
  deps: Pick<ConsumerDeps, "store">,
): Promise<void> {
  const [previous] = await deps.store.readStream(stream, version - 1, version - 1);
  if (previous) return;
  throw new TransientError(
    "gate.gap_unrepairable",
    `${stream.type}#${stream.id}: version ${version} arrived after ${last}, and version ${version - 1} is not in the event store (the gap is ${version - 1 - last} versions long)`,
    { details: { stream, last, version, missing: [[version - 1, version - 1]] } },
  );
}

/**
 * The versions in [from, to] that `present` (in version order, each within the range, each once)
 * lacks: their count and the first few ranges. Walks `present` once.
 */
export function missingRanges(
  present: readonly Envelope[],
  from: number,
  to: number,
): { count: number; ranges: [number, number][]; rangeCount: number } {
  const ranges: [number, number][] = [];
  let rangeCount = 0;
  let next = from;
  const add = (a: number, b: number) => {
    rangeCount++;
    if (ranges.length < MAX_RANGES_REPORTED) ranges.push([a, b]);
  };
  for (const e of present) {
    const v = e.aggregate.version;
    if (v > next) add(next, v - 1);
    next = Math.max(next, v + 1);
  }
  if (next <= to) add(next, to);
  return { count: to - from + 1 - present.length, ranges, rangeCount };
}
