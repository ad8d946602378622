import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TransientError } from "../../functions/core/errors";
import { InMemoryEventStore } from "../../functions/core/memory";
import { consume } from "../../functions/core/pipeline";
import type {
  CommitRequest,
  ConsumerDeps,
  EventStore,
  Loaded,
  LoadRequest,
} from "../../functions/core/ports";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { type Envelope, registry } from "../../schemas";
import { feedback, newTaskId, seedTask } from "./fixtures";

/**
 * For random streams over several aggregates, any delivery schedule with duplicates, reordering
 * and concurrent consumers yields the same final state as in-order delivery, and every event's
 * effect is applied exactly once.
 */

interface World {
  readonly events: Envelope[];
  readonly producerStore: InMemoryEventStore;
}

const worldArb = fc.record({
  tasks: fc.array(
    fc.record({
      steps: fc.integer({ min: 1, max: 4 }),
      ratings: fc.array(fc.integer({ min: 1, max: 5 }), { maxLength: 3 }),
    }),
    {
      minLength: 1,
      maxLength: 4,
    },
  ),
});

async function buildWorld(spec: { tasks: { steps: number; ratings: number[] }[] }): Promise<World> {
  const clock = new ManualClock("2026-09-01T10:00:00.000Z");
  const producerStore = new InMemoryEventStore(clock);
  const deps: ConsumerDeps = { store: producerStore, registry, clock, ids: ulidSource(clock) };
  const events: Envelope[] = [];
  for (const task of spec.tasks) {
    const taskId = newTaskId();
    events.push(...(await seedTask(deps, task.steps, taskId)));
    events.push(...task.ratings.map((r) => feedback(taskId, r)));
  }
  return { events, producerStore };
}

/** A consumer-side store that starts with the producer's event streams (what the relay read). */
function consumerStore(world: World, wrap?: (s: InMemoryEventStore) => EventStore) {
  const clock = new ManualClock("2026-09-01T10:00:01.000Z");
  const inner = new InMemoryEventStore(clock);
  for (const [k, v] of world.producerStore.streams) inner.streams.set(k, new Map(v));
  for (const [k, v] of world.producerStore.states) inner.states.set(k, structuredClone(v));
  const store = wrap ? wrap(inner) : inner;
  const deps: ConsumerDeps = { store, registry, clock, ids: ulidSource(clock) };
  return { inner, deps };
}

function views(store: InMemoryEventStore): Record<string, TaskView> {
  const out: Record<string, TaskView> = {};
  for (const [k, v] of store.states) if (k.startsWith("task_view#")) out[k] = v.data as TaskView;
  return out;
}

/** Deliver each item; a transient failure goes back to the end of the queue (a redelivery). */
async function deliver(
  deps: ConsumerDeps,
  schedule: Envelope[],
  concurrency: number,
): Promise<void> {
  const queue = [...schedule];
  let redeliveries = 0;
  while (queue.length > 0) {
    const batch = queue.splice(0, concurrency);
    const results = await Promise.allSettled(batch.map((e) => consume(e, taskProjection, deps)));
    results.forEach((r, i) => {
      if (r.status === "rejected") {
        if (!(r.reason instanceof TransientError)) throw r.reason;
        queue.push(batch[i] as Envelope);
        if (++redeliveries > 10_000) throw new Error("no progress");
      }
    });
  }
}

const scheduleArb = (n: number) =>
  fc.record({
    copies: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: n, maxLength: n }),
    keys: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), {
      minLength: 3 * n,
      maxLength: 3 * n,
    }),
    concurrency: fc.integer({ min: 1, max: 4 }),
  });

function makeSchedule(events: Envelope[], s: { copies: number[]; keys: number[] }): Envelope[] {
  const deliveries = events.flatMap((e, i) => Array.from({ length: s.copies[i] ?? 1 }, () => e));
  return deliveries
    .map((e, i) => ({ e, k: s.keys[i] ?? 0 }))
    .sort((a, b) => a.k - b.k)
    .map(({ e }) => e);
}

async function property(
  worldSpec: Parameters<typeof buildWorld>[0],
  sched: { copies: number[]; keys: number[]; concurrency: number },
  wrap?: (s: InMemoryEventStore) => EventStore,
) {
  const world = await buildWorld(worldSpec);
  const reference = consumerStore(world);
  await deliver(reference.deps, world.events, 1);

  const chaos = consumerStore(world, wrap);
  await deliver(chaos.deps, makeSchedule(world.events, sched), sched.concurrency);

  // same final state as in-order delivery
  expect(views(chaos.inner)).toEqual(views(reference.inner));
  // each sequenced event applied exactly once, in version order, for every task
  for (const [key, view] of Object.entries(views(chaos.inner))) {
    const taskId = key.slice("task_view#".length);
    const expected = world.events.filter(
      (e) => e.aggregate.id === taskId && e.aggregate.version > 0,
    );
    expect(view.history.map((h) => h.event_id)).toEqual(expected.map((e) => e.event_id));
    const ratings = world.events.filter(
      (e) => e.aggregate.id === taskId && e.aggregate.version === 0,
    );
    expect(view.feedback.count).toBe(ratings.length);
  }
}

const RUNS = 300;

describe("delivery schedules (property)", () => {
  it(`converges to the in-order state with exactly-once effects (${RUNS} schedules)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        worldArb.chain((w) => {
          const n = w.tasks.reduce((sum, t) => sum + t.steps + t.ratings.length, 0);
          return fc.tuple(fc.constant(w), scheduleArb(n));
        }),
        async ([w, s]) => property(w, s),
      ),
      { numRuns: RUNS },
    );
  });

  // The property must have teeth: with the inbox or the gate broken, it finds a counterexample.
  const forgetfulInbox = (inner: InMemoryEventStore): EventStore => ({
    load: async (r: LoadRequest): Promise<Loaded> => ({
      ...(await inner.load(r)),
      inboxHit: false,
    }),
    readStream: (...a) => inner.readStream(...a),
    commit: async (r: CommitRequest) => {
      if (r.inbox) inner.inbox.delete(`${r.inbox.group}#${r.inbox.eventId}`);
      return inner.commit(r);
    },
  });
  const forgetfulGate = (inner: InMemoryEventStore): EventStore => ({
    load: async (r: LoadRequest): Promise<Loaded> => ({ ...(await inner.load(r)), checkpoint: 0 }),
    readStream: (...a) => inner.readStream(...a),
    commit: async (r: CommitRequest) => {
      if (!r.state?.gate) return inner.commit(r);
      const { gate: _ignored, ...state } = r.state;
      return inner.commit({ ...r, state });
    },
  });

  it.each([
    ["inbox", forgetfulInbox],
    ["version gate", forgetfulGate],
  ])("fails when the %s is removed", async (_name, wrap) => {
    const failure = await fc
      .assert(
        fc.asyncProperty(
          worldArb.chain((w) => {
            const n = w.tasks.reduce((sum, t) => sum + t.steps + t.ratings.length, 0);
            return fc.tuple(fc.constant(w), scheduleArb(n));
          }),
          async ([w, s]) => property(w, s, wrap),
        ),
        { numRuns: RUNS },
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(failure).toBeInstanceOf(Error);
    expect(String(failure)).toMatch(/Property failed/);
  });
});
