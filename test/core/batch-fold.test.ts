import { describe, expect, it } from "vitest";
import { BatchFoldingStore } from "../../functions/core/batch-fold";
import { VersionConflictError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { CommitRequest, ConsumerDeps, EventStore } from "../../functions/core/ports";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import type { Envelope } from "../../schemas";
import { countingStore, makeDeps, newTaskId, seedTask } from "./fixtures";

/**
 * A stream batch's writes folded per aggregate (functions/core/batch-fold.ts), through `consume`
 * with the in-memory store: the same states as one write per event, in one write per aggregate.
 */

/** `events` consumed one by one on a store of their own, and the state each aggregate ends in. */
async function oneByOne(events: readonly Envelope[], seeded: ConsumerDeps) {
  for (const event of events) await consume(event, taskProjection, seeded);
}

function folding(deps: ConsumerDeps) {
  const { store: counting, commits } = countingStore(deps.store);
  const fold = new BatchFoldingStore(counting, deps.clock);
  return { fold, commits, folded: { ...deps, store: fold } };
}

const viewOf = (store: EventStore, taskId: string) =>
  store.load({ state: { type: "task_view", id: taskId } }).then((l) => l.state);

describe("a batch's writes folded per aggregate", () => {
  it("leave each aggregate as one write per event would, in one write per aggregate", async () => {
    const alone = makeDeps();
    const batched = makeDeps();
    const [a, b] = [newTaskId(), newTaskId()];
    const events: Envelope[] = [];
    for (const deps of [alone, batched]) {
      events.length = 0;
      const first = await seedTask(deps.deps, 4, a);
      const second = await seedTask(deps.deps, 3, b);
      events.push(...interleaved(first, second));
    }
    await oneByOne(events, alone.deps);
    const { fold, commits, folded } = folding(batched.deps);
    for (const event of events) await consume(event, taskProjection, folded);
    expect(commits).toHaveLength(0);
    expect(fold.keeping()).toBe(true);
    await fold.flush();

    expect(commits).toHaveLength(2);
    expect(fold.keeping()).toBe(false);
    for (const id of [a, b]) {
      const [mine, theirs] = await Promise.all([
        viewOf(batched.store, id),
        viewOf(alone.store, id),
      ]);
      expect(mine?.data).toEqual(theirs?.data);
      expect(mine?.gate).toEqual(theirs?.gate);
      expect(mine?.version).toBe(theirs?.version);
    }
  });

  it("answer a load from what is kept: a repeat in the batch is a duplicate, a gap is read from the store", async () => {
    const { deps, store } = makeDeps();
    const [v1, v2, v3] = (await seedTask(deps, 3)) as [Envelope, Envelope, Envelope];
    const { fold, commits, folded } = folding(deps);
    const outcomes = [];
    for (const event of [v1, v3, v1, v2])
      outcomes.push((await consume(event, taskProjection, folded)).status);
    await fold.flush();

    expect(outcomes).toEqual(["applied", "applied", "duplicate", "duplicate"]);
    // v1's write was kept; v2, read from the store to fill the gap before v3, keeps an inbox row
    // (a repair: a trace shows it), so it went to the store as it came, after v1's write; v3's
    // write was kept again, until the flush.
    expect(commits.map((c) => [c.state?.expectedRevision, c.inbox?.repaired])).toEqual([
      [0, undefined],
      [1, true],
      [2, undefined],
    ]);
    const view = await viewOf(store, v1.aggregate.id);
    expect(view?.gate?.checkpoints[`task#${v1.aggregate.id}`]).toBe(3);
    expect(
      (view?.data as { history: { event_id: string }[] } | undefined)?.history.map(
        (h) => h.event_id,
      ),
    ).toEqual([v1.event_id, v2.event_id, v3.event_id]);
  });

  it("write what is kept before a commit they cannot keep, which goes to the store as it came", async () => {
    const { deps } = makeDeps();
    const [v1] = await seedTask(deps, 1);
    const { fold, commits, folded } = folding(deps);
    await consume(v1 as Envelope, taskProjection, folded);
    // A client's feedback is unsequenced: its id joins the state's recent ones (a gate write),
    // which is kept too; an inbox row is not.
    const row: CommitRequest = {
      inbox: {
        group: "g",
        eventId: "evt_1",
        eventType: "t",
        outcome: "applied",
        aggregate: { type: "task_view", id: "x" },
        correlationId: "c",
        recordedAt: "2026-09-01T10:00:00.000Z",
        expiresAt: 2_000_000_000,
      } as unknown as NonNullable<CommitRequest["inbox"]>,
    };
    await fold.commit(row);
    expect(commits.map((c) => (c.state ? "state" : c.inbox ? "inbox" : "other"))).toEqual([
      "state",
      "inbox",
    ]);
    expect(fold.keeping()).toBe(false);
  });

  it("leave a state at the revision its one write will make, which a later write to it may expect", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    const [v1, v2] = (await seedTask(deps, 2, taskId)) as [Envelope, Envelope];
    const { fold, commits, folded } = folding(deps);
    await consume(v1, taskProjection, folded);
    await consume(v2, taskProjection, folded);
    const view = { type: "task_view", id: taskId };
    const kept = (await fold.load({ state: view })).state;
    expect(kept?.revision).toBe(1);
    // A write that cannot be kept (it spills an id into an inbox row) goes to the store after the
    // kept one, conditional on the revision that one left.
    await fold.commit({
      gate: {
        aggregate: view,
        expectedRevision: 1,
        records: kept?.gate ?? { checkpoints: {}, recent: {} },
      },
      spill: { group: taskProjection.group, ids: [{ eventId: "evt_spilled", expiresAt: 2e9 }] },
    });
    expect(commits.map((c) => c.gate?.expectedRevision ?? c.state?.expectedRevision)).toEqual([
      0, 1,
    ]);
    expect((await store.load({ state: view })).state?.revision).toBe(2);
  });

  it("pass a gate write on to the store while no state of its aggregate is kept: only the store has its data", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    const [v1] = await seedTask(deps, 1, taskId);
    await consume(v1 as Envelope, taskProjection, deps);
    const view = { type: "task_view", id: taskId };
    const stored = (await store.load({ state: view })).state;
    const { fold, commits } = folding(deps);
    const records = { checkpoints: { ...stored?.gate?.checkpoints, "task#other": 2 }, recent: {} };
    await fold.commit({
      gate: { aggregate: view, expectedRevision: stored?.revision ?? 0, records },
    });
    expect(commits).toHaveLength(1);
    expect(fold.keeping()).toBe(false);
    const after = (await fold.load({ state: view })).state;
    expect(after?.data).toEqual(stored?.data);
    expect(after?.gate).toEqual(records);
  });

  it("keep a gate write with the state written before it, and refuse a stale revision", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    const [v1] = await seedTask(deps, 1, taskId);
    const { fold, commits, folded } = folding(deps);
    await consume(v1 as Envelope, taskProjection, folded);
    const view = { type: "task_view", id: taskId };
    const kept = (await fold.load({ state: view })).state;
    const records = { checkpoints: { ...kept?.gate?.checkpoints, "task#other": 2 }, recent: {} };
    await expect(
      fold.commit({ gate: { aggregate: view, expectedRevision: 0, records } }),
    ).rejects.toBeInstanceOf(VersionConflictError);
    await fold.commit({
      gate: { aggregate: view, expectedRevision: kept?.revision ?? 0, records },
    });
    expect((await fold.load({ state: view })).state).toMatchObject({ data: kept?.data });
    await fold.flush();

    expect(commits).toHaveLength(1);
    expect(commits[0]?.state?.gate).toEqual(records);
    const stored = await viewOf(store, taskId);
    expect(stored?.data).toEqual(kept?.data);
    expect(stored?.gate).toEqual(records);
  });

  it("stay kept when the store refuses the flush, and the store is left as it was", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    const [v1, v2] = (await seedTask(deps, 2, taskId)) as [Envelope, Envelope];
    const { fold, folded } = folding(deps);
    await consume(v1, taskProjection, folded);
    // Another writer gets there first (a rebuild, say): the flush's condition fails.
    await consume(v1, taskProjection, deps);
    await consume(v2, taskProjection, folded);
    await expect(fold.flush()).rejects.toBeInstanceOf(VersionConflictError);
    expect(fold.keeping()).toBe(true);
    const stored = await viewOf(store, taskId);
    expect(stored?.gate?.checkpoints[`task#${taskId}`]).toBe(1);
  });
});

function interleaved<T>(a: readonly T[], b: readonly T[]): T[] {
  const out: T[] = [];
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== undefined) out.push(a[i] as T);
    if (b[i] !== undefined) out.push(b[i] as T);
  }
  return out;
}
