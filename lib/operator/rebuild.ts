import { stateRefOf } from "../../functions/core/apply";
import { InMemoryEventStore } from "../../functions/core/memory";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps, EventStore, StreamLister } from "../../functions/core/ports";
import type { ConsumeResult, Role } from "../../functions/core/role";
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
 * The pipeline's dependencies for feeding one stored event: its clock stands at the time the
 * group decided on it when its decision recorded that (`at`), else at the event's own time, so an
 * expiring event is judged as a fold judges it (when it happened), not by how old it is now.
 */
export const foldDeps = (store: EventStore, event: Envelope, at?: Date): ConsumerDeps => {
  const time = at ?? new Date(event.occurred_at);
  const clock = { now: () => (Number.isNaN(time.getTime()) ? systemClock.now() : time) };
  return { store, registry, clock, ids: ulidSource() };
};

/**
 * The role that decides one event in a fold, and when: a role whose decision needs ports is built
 * by its `foldWith` with what its decision on the event recorded (the events it appended to the
 * group's own stream, caused by the event; `reader` is the event store they are read from), and
 * decides at the time those events record; any other role is its own fold.
 */
export async function foldStep(
  role: Role<unknown>,
  event: Envelope,
  reader: EventStore,
): Promise<{ readonly role: Role<unknown>; readonly at?: Date }> {
  if (!role.foldWith) return { role };
  const home = stateRefOf(role, event);
  const emitted = (await reader.readStream(home, 1, MAX_STREAM_VERSION)).filter(
    (e) => e.causation_id === event.event_id,
  );
  const recorded = { emitted, readStream: reader.readStream.bind(reader) };
  const first = emitted[0];
  return {
    role: role.foldWith(recorded),
    ...(first ? { at: new Date(first.occurred_at) } : {}),
  };
}

/** One event fed to the role through the pipeline, as a fold decides it. */
export async function foldOne(
  store: EventStore,
  reader: EventStore,
  role: Role<unknown>,
  event: Envelope,
): Promise<ConsumeResult> {
  const step = await foldStep(role, event, reader);
  return consume(event, step.role, foldDeps(store, event, step.at));
}

/**
 * JSON with object keys sorted: DynamoDB returns a map's keys in any order. A missing value (a
 * view that is not there) is `undefined`, as its own string, since JSON has none for it.
 */
export function canonical(value: unknown): string {
  const json: string | undefined = JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)),
        )
      : v,
  );
  return json ?? "undefined";
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
    results.push(await foldOne(store, store, role, event));
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
 * A scratch store holding the given streams' events: what a fold writes stays in it, and the
 * events a decision appends are left out (the event store already has what the group emitted).
 */
export async function scratchOf(events: readonly Envelope[]): Promise<InMemoryEventStore> {
  const scratch = new InMemoryEventStore();
  await scratch.commit({ append: events });
  const commit = scratch.commit.bind(scratch);
  scratch.commit = ({ append: _append, ...rest }) => commit(rest);
  return scratch;
}

/** The given streams folded through the role on a scratch store, and the states it wrote. */
export async function foldStreams(
  store: EventStore,
  role: Role<unknown>,
  streams: readonly AggregateRef[],
): Promise<{ readonly scratch: InMemoryEventStore; readonly touched: AggregateRef[] }> {
  const all: Envelope[] = [];
  for (const stream of streams)
    all.push(...(await store.readStream(stream, 1, MAX_STREAM_VERSION)));
  // A state fed by several streams gets their events as they were committed (by time, then id);
  // an event ahead of its stream's order is a gap the pipeline fills from the scratch store.
  all.sort((a, b) =>
    a.occurred_at === b.occurred_at
      ? a.event_id.localeCompare(b.event_id)
      : a.occurred_at.localeCompare(b.occurred_at),
  );
  const scratch = await scratchOf(all);
  const touched = new Map<string, AggregateRef>();
  for (const event of all) {
    if (!role.subscriptions.includes(event.event_type)) continue;
    await foldOne(scratch, store, role, event);
    const ref = stateRefOf(role, event);
    touched.set(`${ref.type}#${ref.id}`, ref);
  }
  return { scratch, touched: [...touched.values()] };
}

/**
 * state = fold(events) (seed 000 §8): fold the given streams' events in version order through
 * the role on a scratch store, and compare every state the fold wrote with the stored one.
 */
export async function checkFold(
  store: EventStore,
  role: Role<unknown>,
  streams: readonly AggregateRef[],
): Promise<{ readonly states: number; readonly drift: readonly Drift[] }> {
  const { scratch, touched } = await foldStreams(store, role, streams);
  const drift: Drift[] = [];
  for (const ref of touched) {
    const folded = (await scratch.load({ state: ref })).state?.data;
    const stored = (await store.load({ state: ref })).state?.data;
    if (canonical(folded) !== canonical(stored)) drift.push({ state: ref, stored, folded });
  }
  return { states: touched.length, drift };
}
