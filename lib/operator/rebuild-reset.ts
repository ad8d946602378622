import { TransientError, VersionConflictError } from "../../functions/core/errors";
import { listingAfter } from "../../functions/core/listing";
import type { InMemoryEventStore } from "../../functions/core/memory";
import type { EventStore, StoredState } from "../../functions/core/ports";
import type { Role } from "../../functions/core/role";
import { systemClock } from "../../functions/core/runtime";
import type { AggregateRef } from "../../schemas";
import { canonical, foldStreams } from "./rebuild";

/** What a reset did to the states its streams fold to. */
export interface ResetResult {
  readonly states: number;
  /** Written from the fold. */
  readonly rewritten: number;
  /** Already the fold, with the fold's checkpoints: nothing written. */
  readonly unchanged: number;
  /** Rounds started again because a live commit moved a state in between. */
  readonly retries: number;
}

export interface ResetOptions {
  /** Rounds before giving up (transiently) under live writes. @default 5 */
  readonly maxRounds?: number;
  /** Called after a round's fold, before its writes (a test interleaves a live commit here). */
  readonly beforeWrite?: (round: number) => Promise<void> | void;
}

const keyOf = (ref: AggregateRef) => `${ref.type}#${ref.id}`;

/**
 * `rebuild --reset`: rewrite every state the given streams fold to, data and checkpoints, from
 * the fold, while live traffic goes on. Each round reads the stored states first, then the
 * streams; folds them on a scratch store; and writes each folded state conditional on the
 * revision it read. Live traffic cannot corrupt the result:
 * - a live commit that lands between the read and the write moves the revision, so the reset's
 *   write fails (VersionConflictError) and the round starts again: read, fold, write;
 * - a live delivery that loaded the state before the reset's write fails its own revision
 *   condition, reloads, and finds the reset state, whose checkpoints make the events the fold
 *   applied duplicates and apply later ones on top;
 * - every event a live commit applied before the round's read was appended before it was
 *   delivered, so the stream read after it holds it: the fold is never behind the state it replaces.
 * The first fold only finds which states the streams fold to (there is nothing to read before it).
 */
export async function resetStates(
  store: EventStore,
  role: Role<unknown>,
  streams: readonly AggregateRef[],
  options: ResetOptions = {},
): Promise<ResetResult> {
  const maxRounds = options.maxRounds ?? 5;
  let refs = (await foldStreams(store, role, streams)).touched;
  let retries = 0;
  for (let round = 0; round < maxRounds; round++) {
    const stored = new Map<string, StoredState | undefined>();
    for (const ref of refs) stored.set(keyOf(ref), (await store.load({ state: ref })).state);
    const { scratch, touched } = await foldStreams(store, role, streams);
    if (touched.some((ref) => !stored.has(keyOf(ref)))) {
      refs = touched;
      continue;
    }
    await options.beforeWrite?.(round);
    try {
      const rewritten = await writeFolded(store, role, scratch, touched, stored);
      return {
        states: touched.length,
        rewritten,
        unchanged: touched.length - rewritten,
        retries,
      };
    } catch (error) {
      if (!(error instanceof VersionConflictError)) throw error;
      retries++;
    }
  }
  throw new TransientError(
    "rebuild.reset_contention",
    `live commits kept moving the states of ${role.group} for ${maxRounds} rounds; run the reset again`,
  );
}

/** Write each folded state that differs from the stored one; how many were written. */
async function writeFolded(
  store: EventStore,
  role: Role<unknown>,
  scratch: InMemoryEventStore,
  refs: readonly AggregateRef[],
  stored: ReadonlyMap<string, StoredState | undefined>,
): Promise<number> {
  const folds = new Map<string, StoredState | undefined>();
  for (const ref of refs) {
    const folded = (await scratch.load({ state: ref })).state;
    const unfolded = unfoldedStreams(folded, stored.get(keyOf(ref)));
    if (unfolded.length > 0)
      throw new IncompleteFoldError(
        `${ref.type}/${ref.id} also follows ${unfolded.join(", ")}, whose streams were not folded: give their types too (nothing was written)`,
      );
    folds.set(keyOf(ref), folded);
  }
  let written = 0;
  for (const ref of refs) {
    const folded = folds.get(keyOf(ref));
    const before = stored.get(keyOf(ref));
    if (!folded || sameFold(folded, before)) continue;
    const next = folded.data ?? null;
    const summary = next === null || !role.summarize ? undefined : role.summarize(next);
    await store.commit({
      state: {
        aggregate: ref,
        expectedRevision: before?.revision ?? 0,
        next,
        version: folded.version,
        // The groups a reset runs for ask no sweeper's attention (Decision.dueAt): not due.
        dueAt: null,
        summary,
        listing: summary && listingAfter(before?.listing, summary, systemClock.now()),
        gate: folded.gate,
        compact: role.compactState,
      },
    });
    written++;
  }
  return written;
}

/** A reset asked to fold fewer streams than a state follows: writing it would lose the rest. */
export class IncompleteFoldError extends Error {
  override readonly name = "IncompleteFoldError";
}

/** Streams the stored state has checkpoints of that the fold did not reach. */
function unfoldedStreams(folded: StoredState | undefined, stored: StoredState | undefined) {
  const reached = folded?.gate?.checkpoints ?? {};
  return Object.keys(stored?.gate?.checkpoints ?? {}).filter((stream) => !(stream in reached));
}

/** True when the stored state is the fold already: its data, stream head and checkpoints. */
function sameFold(folded: StoredState, stored: StoredState | undefined): boolean {
  return (
    stored !== undefined &&
    stored.version === folded.version &&
    canonical(stored.data) === canonical(folded.data) &&
    canonical(stored.gate?.checkpoints ?? {}) === canonical(folded.gate?.checkpoints ?? {})
  );
}
