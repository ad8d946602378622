import { describe, expect, it } from "vitest";
import { RECENT_IDS_KEPT, recordsAfter, spilledFrom } from "../../functions/core/gate-records";
import { consume } from "../../functions/core/pipeline";
import type { GateRecords } from "../../functions/core/ports";
import type { Role } from "../../functions/core/role";
import { audit } from "../../functions/roles/audit/audit";
import { recordedOutcomes } from "../../lib/operator/recorded-outcomes";
import type { Envelope } from "../../schemas";
import { countingStore, feedback, makeDeps, newTaskId } from "./fixtures";

/**
 * An unsequenced message is recorded by its id among the state's recent ones: a commit that
 * emits nothing is one write of one item, whatever the decision. An id that must leave the
 * recent ones while it still counts is spilled into an inbox row in the same commit, and found
 * there until it expires.
 */

const TTL = 7 * 24 * 3600;

/** Sums the ratings of a task's feedback; a rating of 1 changes nothing. */
const rater: Role<{ total: number }> = {
  group: "rater",
  subscriptions: ["task.feedback.received"],
  stateOf: (event) => ({ type: "ratings", id: event.task_id }),
  decide: (state, event) => {
    const { rating } = event.payload as { rating: number };
    return rating === 1 ? {} : { state: { total: (state?.total ?? 0) + rating } };
  },
};

describe("gate records of unsequenced ids", () => {
  const move = (event: Envelope, now: number) => ({
    event,
    stream: undefined,
    byId: true,
    now,
    expiresAt: now + TTL,
  });

  it("keep at most RECENT_IDS_KEPT live ids: one more spills the one that expires first", () => {
    const taskId = newTaskId();
    let records: GateRecords | undefined;
    const ids: string[] = [];
    for (let i = 0; i <= RECENT_IDS_KEPT; i++) {
      const event = feedback(taskId, 5);
      ids.push(event.event_id);
      const before = records;
      records = recordsAfter(before, move(event, 1000 + i));
      const spilled = spilledFrom(before?.recent, records?.recent ?? {}, 1000 + i);
      if (i < RECENT_IDS_KEPT) expect(spilled).toEqual([]);
      else expect(spilled).toEqual([{ eventId: ids[0], expiresAt: 1000 + TTL }]);
    }
    expect(Object.keys(records?.recent ?? {})).toHaveLength(RECENT_IDS_KEPT);
    expect(records?.spilledUntil).toBe(1000 + TTL);
  });

  it("never spill the id they record, even among ids that all expire in the same second", () => {
    const taskId = newTaskId();
    let records: GateRecords | undefined;
    const ids: string[] = [];
    for (let i = 0; i <= RECENT_IDS_KEPT + 1; i++) {
      const event = feedback(taskId, 5);
      ids.push(event.event_id);
      const before = records;
      records = recordsAfter(before, move(event, 1000));
      const spilled = spilledFrom(before?.recent, records?.recent ?? {}, 1000);
      expect(records?.recent[event.event_id]).toBe(1000 + TTL);
      expect(spilled.map((s) => s.eventId)).not.toContain(event.event_id);
      expect(spilled).toHaveLength(i < RECENT_IDS_KEPT ? 0 : 1);
    }
    expect(Object.keys(records?.recent ?? {})).toHaveLength(RECENT_IDS_KEPT);
  });

  it("drop expired ids without spilling them, and forget the spill once it has expired", () => {
    const first = recordsAfter(undefined, move(feedback(newTaskId(), 5), 0));
    const spilledBefore = { ...first, spilledUntil: 50 } as GateRecords;
    const later = recordsAfter(spilledBefore, move(feedback(newTaskId(), 5), TTL + 100));
    expect(Object.keys(later?.recent ?? {})).toHaveLength(1);
    expect(spilledFrom(spilledBefore.recent, later?.recent ?? {}, TTL + 100)).toEqual([]);
    expect(later?.spilledUntil).toBeUndefined();
  });
});

describe("the commit of an unsequenced message", () => {
  it("is one write of the state, applied or not, with no inbox row", async () => {
    const { deps, store } = makeDeps();
    const { store: counting, commits } = countingStore(store);
    const taskId = newTaskId();
    const applied = feedback(taskId, 4);
    const unchanged = feedback(taskId, 1);
    await consume(applied, rater, { ...deps, store: counting });
    await consume(unchanged, rater, { ...deps, store: counting });
    expect(commits.map((c) => [c.recordedByState, !!c.state, !!c.gate, !!c.spill])).toEqual([
      [true, true, false, false],
      [true, false, true, false],
    ]);
    expect(store.inbox.size).toBe(0);
    // Both are duplicates now: found by the state read, nothing written.
    for (const message of [applied, unchanged])
      expect((await consume(message, rater, { ...deps, store: counting })).status).toBe(
        "duplicate",
      );
    expect(commits).toHaveLength(2);
    expect(store.states.get(`ratings#${taskId}`)?.data).toEqual({ total: 4 });
  });

  it("spills the oldest id into a row once the state holds RECENT_IDS_KEPT, and still finds it", async () => {
    const { deps, store, clock } = makeDeps();
    const { store: counting, commits } = countingStore(store);
    const taskId = newTaskId();
    const messages = Array.from({ length: RECENT_IDS_KEPT + 3 }, () => feedback(taskId, 2));
    for (const message of messages) {
      clock.advance(1000);
      await consume(message, rater, { ...deps, store: counting });
    }
    expect(commits.slice(0, RECENT_IDS_KEPT).every((c) => c.spill === undefined)).toBe(true);
    expect(commits.slice(RECENT_IDS_KEPT).map((c) => c.spill?.ids.map((s) => s.eventId))).toEqual(
      messages.slice(0, 3).map((m) => [m.event_id]),
    );
    expect(store.spilledRows.size).toBe(3);
    expect(
      await store.spilled(
        messages.slice(0, 4).map((m) => ({ group: "rater", eventId: m.event_id })),
      ),
    ).toEqual([true, true, true, false]);
    // Every message, spilled or recent, is a duplicate; none is applied twice.
    for (const message of messages)
      expect((await consume(message, rater, deps)).status).toBe("duplicate");
    expect(store.states.get(`ratings#${taskId}`)?.data).toEqual({
      total: 2 * messages.length,
    });
    // A trace still finds the group's outcome of a spilled message, in its row.
    const derive = recordedOutcomes([rater], { states: store, checkpoints: store });
    const outcomes = await derive?.([], messages.slice(0, 2));
    expect(outcomes?.map((o) => [o.eventId, o.outcome])).toEqual(
      messages.slice(0, 2).map((m) => [m.event_id, "applied"]),
    );
    // Once the spilled ids have expired, the state stops asking for their rows.
    clock.advance(TTL * 1000);
    const next = feedback(taskId, 2);
    await consume(next, rater, deps);
    expect(store.states.get(`ratings#${taskId}`)?.gate?.spilledUntil).toBeUndefined();
  });

  it("leaves an item that expires with its ids when the aggregate has no state, and only then", async () => {
    const { deps, store } = makeDeps();
    const { store: counting, commits } = countingStore(store);
    const taskId = newTaskId();
    // A rating of 1 changes nothing: the item holds the two ids alone.
    const first = feedback(taskId, 1);
    const second = feedback(taskId, 1);
    await consume(first, rater, { ...deps, store: counting });
    await consume(second, rater, { ...deps, store: counting });
    const recent = store.states.get(`ratings#${taskId}`)?.gate?.recent ?? {};
    expect(commits.map((c) => c.gate?.expiresAt)).toEqual([
      recent[first.event_id],
      Math.max(...Object.values(recent)),
    ]);
    // Once there is a state, no expiry: its gate writes keep it.
    await consume(feedback(taskId, 3), rater, { ...deps, store: counting });
    await consume(feedback(taskId, 1), rater, { ...deps, store: counting });
    expect(commits.slice(2).map((c) => [!!c.state, c.gate?.expiresAt])).toEqual([
      [true, undefined],
      [false, undefined],
    ]);
  });

  it("by the audit group is its row alone, which keeps the message 30 days and is read alone", async () => {
    const { deps, store } = makeDeps();
    const { store: counting, commits } = countingStore(store);
    const message = feedback(newTaskId(), 5);
    expect((await consume(message, audit, { ...deps, store: counting })).status).toBe("applied");
    expect(commits).toEqual([
      {
        inbox: expect.objectContaining({
          group: "audit",
          eventId: message.event_id,
          envelope: message,
          expiresAt: Math.floor(deps.clock.now().getTime() / 1000) + 30 * 24 * 3600,
        }),
      },
    ]);
    expect(store.states.size).toBe(0);
    expect((await consume(message, audit, { ...deps, store: counting })).status).toBe("duplicate");
    expect(commits).toHaveLength(1);
  });
});
