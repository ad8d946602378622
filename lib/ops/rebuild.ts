import { stateRefOf } from "../../functions/core/apply";
import { InMemoryEventStore } from "../../functions/core/memory";
import { type ConsumeResult, consume, type Role } from "../../functions/core/pipeline";
import type { ConsumerDeps, EventStore, StreamLister } from "../../functions/core/ports";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import { type AggregateRef, type Envelope, MAX_STREAM_VERSION, registry } from "../../schemas";

/** How far a rebuild got: streams and events fed, by outcome, and where to resume. */
export interface RebuildProgress {
  readonly streams: number;
  readonly events: number;
  readonly applied: number;
  /** Already applied by the group (live traffic, or an earlier run): nothing changed. */
  readonly duplicates: number;
  readonly discarded: number;
  /** The last stream done; a resumed rebuild starts after it. */
  readonly after?: string;
  readonly done: boolean;
}

export interface RebuildOptions {
  /** Resume after this stream key (from a saved progress). */
  readonly after?: string;
  /** Streams per page; progress is reported after each page. */
  readonly pageSize?: number;
  readonly onProgress?: (progress: RebuildProgress) => Promise<void> | void;
}

/**
 * The pipeline's dependencies for feeding one stored event: its clock stands at the event's own
 * time, so an expiring event is judged as a fold judges it (when it happened), not by how old it
 * is now.
 */
export const foldDeps = (store: EventStore, event: Envelope): ConsumerDeps => {
  const at = new Date(event.occurred_at);
  const clock = { now: () => (Number.isNaN(at.getTime()) ? systemClock.now() : at) };
  return { store, registry, clock, ids: ulidSource() };
};

/** JSON with object keys sorted: DynamoDB returns a map's keys in any order. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)),
        )
      : v,
  );
}

/**
 * Feed a projection every stream of an aggregate type from the event store, each in version
 * order, through the same pipeline a delivery takes: the group's checkpoints make events it
 * already applied duplicates, so live traffic may go on meanwhile and the result is the in-order
 * fold. Resumable from the last stream of a page.
 */
export async function rebuild(
  lister: StreamLister,
  store: EventStore,
  role: Role<unknown>,
  type: string,
  options: RebuildOptions = {},
): Promise<RebuildProgress> {
  let progress: RebuildProgress = {
    streams: 0,
    events: 0,
    applied: 0,
    duplicates: 0,
    discarded: 0,
    done: false,
    ...(options.after ? { after: options.after } : {}),
  };
  let after = options.after;
  for (;;) {
    const page = await lister.streamsOfType(type, after, options.pageSize ?? 100);
    for (const stream of page.streams) {
      const results = await feedStream(store, role, stream);
      progress = tally(progress, results);
      after = `${stream.type}#${stream.id}`;
    }
    progress = { ...progress, ...(after ? { after } : {}), done: page.next === undefined };
    await options.onProgress?.(progress);
    if (page.next === undefined) return progress;
  }
}

async function feedStream(
  store: EventStore,
  role: Role<unknown>,
  stream: AggregateRef,
): Promise<ConsumeResult[]> {
  const events = await store.readStream(stream, 1, MAX_STREAM_VERSION);
  const results: ConsumeResult[] = [];
  for (const event of events) {
    if (!role.subscriptions.includes(event.event_type)) continue;
    results.push(await consume(event, role, foldDeps(store, event)));
  }
  return results;
}

function tally(progress: RebuildProgress, results: readonly ConsumeResult[]): RebuildProgress {
  const count = (status: string) =>
    results.reduce((n, r) => n + r.steps.filter((s) => s.status === status).length, 0);
  return {
    ...progress,
    streams: progress.streams + 1,
    events: progress.events + results.length,
    applied: progress.applied + count("applied"),
    duplicates: progress.duplicates + count("duplicate"),
    discarded: progress.discarded + count("discarded"),
  };
}

/** A state that differs from the fold of its streams. */
export interface Drift {
  readonly state: AggregateRef;
  readonly stored: unknown;
  readonly folded: unknown;
}

/**
 * state = fold(events) (seed 000 §8): fold the given streams' events in version order through
 * the role on an in-memory store, and compare every state the fold wrote with the stored one.
 */
export async function checkFold(
  store: EventStore,
  role: Role<unknown>,
  streams: readonly AggregateRef[],
): Promise<{ readonly states: number; readonly drift: readonly Drift[] }> {
  const scratch = new InMemoryEventStore();
  const touched = new Map<string, AggregateRef>();
  const all: Envelope[] = [];
  for (const stream of streams)
    all.push(...(await store.readStream(stream, 1, MAX_STREAM_VERSION)));
  await scratch.commit({ append: all });
  for (const event of all) {
    if (!role.subscriptions.includes(event.event_type)) continue;
    await consume(event, role, foldDeps(scratch, event));
    const ref = stateRefOf(role, event);
    touched.set(`${ref.type}#${ref.id}`, ref);
  }
  const drift: Drift[] = [];
  for (const ref of touched.values()) {
    const folded = (await scratch.load({ state: ref })).state?.data;
    const stored = (await store.load({ state: ref })).state?.data;
    if (canonical(folded) !== canonical(stored)) drift.push({ state: ref, stored, folded });
  }
  return { states: touched.size, drift };
}
