import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import { failureRecordOf } from "../../functions/handlers/failure-record";
import { audit, auditRecordRef, outcomeOfAuditRecord } from "../../functions/roles/audit/audit";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { recordedOutcomes } from "../../lib/operator/recorded-outcomes";
import { buildTrace } from "../../lib/operator/trace";
import type { Envelope } from "../../schemas";
import { countingStore, feedback, makeDeps, newTaskId, seedTask } from "./fixtures";

/**
 * The audit group writes one item per event and nothing else: its record is its dedup and its
 * trace record, so an audited event costs one read and one write.
 */
describe("states that record what their group applied stand in for inbox rows", () => {
  it("commits each event with its record alone; a copy is a duplicate found by the read", async () => {
    const { deps, store } = makeDeps();
    const [v1, v2] = await seedTask(deps, 2);
    const { store: counting, commits } = countingStore(store);
    const withCount = { ...deps, store: counting };
    for (const e of [v2, v1, v2, v1]) await consume(e, audit, withCount);
    expect(commits).toHaveLength(2);
    for (const c of commits) {
      expect(c.recordedByState).toBe(true);
      expect([c.checkpoint, c.gate, c.append]).toEqual([undefined, undefined, undefined]);
      expect(c.state?.expectedRevision).toBe(0);
    }
    expect(await store.inboxRecords("audit", [v1?.event_id ?? "", v2?.event_id ?? ""])).toEqual([]);
    const outcomes = await recordedOutcomes([audit], { states: store, checkpoints: store })?.(
      [v1?.event_id ?? "", "unknown"],
      [],
    );
    expect(outcomes).toEqual([
      outcomeOfAuditRecord(
        store.states.get(`audit_record#evt_${v1?.event_id}`)?.data as Parameters<
          typeof outcomeOfAuditRecord
        >[0],
      ),
    ]);
    expect(outcomes?.[0]).toMatchObject({
      group: "audit",
      eventId: v1?.event_id,
      eventType: v1?.event_type,
      outcome: "applied",
      correlationId: v1?.correlation_id,
    });
  });

  it("a trace shows the audit group's outcome from its records, found by an event id too", async () => {
    const { deps, store } = makeDeps();
    const [v1] = await seedTask(deps, 1);
    const id = v1?.event_id ?? "";
    await consume(v1, audit, deps);
    const sources = {
      reader: store,
      groups: ["audit"],
      sideEffects: async () => [],
      recorded: recordedOutcomes([audit], { states: store, checkpoints: store }),
    };
    const byEvent = await buildTrace(sources, id);
    expect(byEvent?.roots[0]?.outcomes).toMatchObject([{ group: "audit", outcome: "applied" }]);
    const byTask = await buildTrace(sources, v1?.task_id ?? "");
    expect(byTask?.roots[0]?.outcomes).toMatchObject([{ group: "audit", outcome: "applied" }]);
    // Without the records, the group's outcome is not known.
    const without = await buildTrace({ ...sources, recorded: undefined }, v1?.task_id ?? "");
    expect(without?.roots[0]?.outcomes).toEqual([]);
    expect(recordedOutcomes([], { states: store, checkpoints: store })).toBeUndefined();
    expect(auditRecordRef(id)).toEqual({ type: "audit_record", id: `evt_${id}` });
  });

  it("a retry before the apply does not hide the outcome the group's records show", async () => {
    const { deps, store } = makeDeps();
    const [v1] = await seedTask(deps, 1);
    if (!v1) throw new Error("no event");
    const failed = failureRecordOf(JSON.stringify(v1), {
      group: "audit",
      error: { code: "dynamodb.throttled", message: "Rate exceeded", errorClass: "transient" },
      attempts: 1,
      outcome: "retrying",
      now: new Date(),
      ttlSeconds: 3600,
    });
    if (failed) await store.record(failed);
    await consume(v1, audit, deps);
    const trace = await buildTrace(
      {
        reader: store,
        groups: ["audit"],
        sideEffects: async () => [],
        recorded: recordedOutcomes([audit], { states: store, checkpoints: store }),
      },
      v1.task_id,
    );
    expect(trace?.roots[0]?.outcomes).toMatchObject([
      { group: "audit", outcome: "applied", attempts: 1, error: { code: "dynamodb.throttled" } },
    ]);
  });

  it("a projection's checkpoint records what it applied: no inbox row, the trace derives it", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 3);
    const [v1, v2, v3] = events as [Envelope, Envelope, Envelope];
    for (const e of [v1, v2]) await consume(e, taskProjection, deps);
    expect(await store.inboxRecords("task-projection", [v1.event_id, v2.event_id])).toEqual([]);
    const derive = recordedOutcomes([taskProjection], { states: store, checkpoints: store });
    const outcomes = await derive?.([], events);
    // v3 is not applied yet: the view's checkpoint of the task stream is at 2.
    expect(outcomes?.map((o) => [o.group, o.eventId, o.outcome, o.recordedAt])).toEqual([
      ["task-projection", v1.event_id, "applied", ""],
      ["task-projection", v2.event_id, "applied", ""],
    ]);
    const trace = await buildTrace(
      {
        reader: store,
        groups: ["task-projection"],
        sideEffects: async () => [],
        recorded: derive,
      },
      v3.task_id,
    );
    const outcomesOf = (node: NonNullable<typeof trace>["roots"][number]): string[] => [
      ...node.outcomes.map((o) => `${node.event.version} ${o.group} ${o.outcome}`),
      ...node.children.flatMap(outcomesOf),
    ];
    expect(trace?.roots.flatMap(outcomesOf)).toEqual([
      "1 task-projection applied",
      "2 task-projection applied",
    ]);
  });

  it("an applied stream event that emits is its state and its events: no row, the trace derives it", async () => {
    const { deps, store } = makeDeps();
    const [v1] = (await seedTask(deps, 1)) as [Envelope];
    const planner: Role<{ planned: number }> = {
      group: "planner",
      subscriptions: ["task.accepted"],
      stateOf: (e) => ({ type: "task", id: `${e.aggregate.id}-plan` }),
      decide: (s) => ({
        state: { planned: (s?.planned ?? 0) + 1 },
        emit: [{ type: "plan.created", payload: { steps: [{ title: "a" }] } }],
      }),
    };
    const { store: counting, commits } = countingStore(store);
    await consume(v1, planner, { ...deps, store: counting });
    expect(await consume(v1, planner, { ...deps, store: counting })).toMatchObject({
      status: "duplicate",
    });
    expect(commits).toHaveLength(1);
    expect(commits[0]).toMatchObject({ recordedByState: true, state: { version: 1 } });
    expect([commits[0]?.checkpoint, commits[0]?.append?.length]).toEqual([undefined, 1]);
    expect(await store.inboxRecords("planner", [v1.event_id])).toEqual([]);
    const derive = recordedOutcomes([planner], { states: store, checkpoints: store });
    const emitted = store.log.find((e) => e.causation_id === v1.event_id);
    expect(await derive?.([v1.event_id], store.log)).toEqual([
      expect.objectContaining({
        group: "planner",
        eventId: v1.event_id,
        outcome: "applied",
        recordedAt: emitted?.occurred_at,
      }),
    ]);
  });

  it("a shared stream's checkpoint row records what the group applied of it", async () => {
    const { deps, store } = makeDeps();
    const events = (await seedTask(deps, 3)) as [Envelope, Envelope, Envelope];
    const noter: Role<{ seen: string }> = {
      group: "noter",
      subscriptions: ["task.accepted", "plan.created", "answer.generated"],
      // One state per event of the task's stream.
      stateOf: (e) => ({ type: "note", id: `note_${e.event_id}` }),
      sharedStreams: ["task"],
      decide: (_s, e) => ({ state: { seen: e.event_type } }),
    };
    const { store: counting, commits } = countingStore(store);
    for (const e of events.slice(0, 2)) await consume(e, noter, { ...deps, store: counting });
    expect(commits.map((c) => [c.recordedByState, c.checkpoint?.to])).toEqual([
      [true, 1],
      [true, 2],
    ]);
    const ids = events.map((e) => e.event_id);
    expect(await store.inboxRecords("noter", ids)).toEqual([]);
    const derive = recordedOutcomes([noter], { states: store, checkpoints: store });
    const outcomes = await derive?.(ids, events);
    // The third is not applied: the group's checkpoint of the stream is at 2.
    expect(outcomes?.map((o) => [o.eventId, o.outcome, o.recordedAt])).toEqual([
      [events[0].event_id, "applied", ""],
      [events[1].event_id, "applied", ""],
    ]);
  });

  it("an unsequenced message is recorded by its id on the state, and kept whole by the audit group", async () => {
    const { deps, store } = makeDeps();
    const fb = feedback(newTaskId(), 4);
    const rater: Role<{ rating: number }> = {
      group: "rater",
      subscriptions: ["task.feedback.received"],
      decide: () => ({ state: { rating: 4 } }),
    };
    const { store: counting, commits } = countingStore(store);
    await consume(fb, rater, { ...deps, store: counting });
    await consume(fb, audit, { ...deps, store: counting });
    // The rater: one write of its state, which records the id; no row.
    expect(commits[0]?.recordedByState).toBe(true);
    expect(commits[0]?.state?.gate?.recent[fb.event_id]).toBeGreaterThan(0);
    expect(await store.inboxRecords("rater", [fb.event_id])).toEqual([]);
    // The audit group: its row alone, with the message, for the declared 30 days; no state.
    expect(commits[1]).toEqual({ inbox: expect.objectContaining({ envelope: fb }) });
    const until = Math.floor(deps.clock.now().getTime() / 1000) + 30 * 24 * 3600;
    expect(await store.inboxRecords("audit", [fb.event_id])).toMatchObject([
      { eventId: fb.event_id, outcome: "applied", expiresAt: until },
    ]);
    expect(store.states.get(`audit_record#evt_${fb.event_id}`)).toBeUndefined();
  });

  it("a trace finds an unsequenced message by the audit group's row (by its id or correlation), and each group's outcome on its state", async () => {
    const { deps, store } = makeDeps();
    const fb = feedback(newTaskId(), 4);
    const rater: Role<{ rating: number }> = {
      group: "rater",
      subscriptions: ["task.feedback.received"],
      // Named by the payload: the trace needs the message whole to find this state.
      stateOf: (event) => ({
        type: "rating",
        id: `${event.task_id}_${(event.payload as { rating: number }).rating}`,
      }),
      decide: () => ({ state: { rating: 4 } }),
    };
    const ignorer: Role<unknown> = {
      group: "ignorer",
      subscriptions: ["task.feedback.received"],
      decide: () => ({}),
    };
    for (const role of [rater, audit, ignorer] as Role<unknown>[]) await consume(fb, role, deps);
    const sources = {
      reader: store,
      groups: ["audit", "rater", "ignorer"],
      sideEffects: async () => [],
      recorded: recordedOutcomes([audit, rater, ignorer], { states: store, checkpoints: store }),
    };
    for (const id of [fb.event_id, fb.correlation_id]) {
      const trace = await buildTrace(sources, id);
      expect(trace?.roots.map((r) => r.event.eventId)).toEqual([fb.event_id]);
      expect(trace?.roots[0]?.outcomes.map((o) => [o.group, o.outcome])).toEqual([
        ["audit", "applied"],
        ["ignorer", "applied"],
        ["rater", "applied"],
      ]);
    }
    // Inbox rows are not task roots: by its task alone, a message is found through the task's
    // stored events or its failure records, and this task has neither.
    expect(await buildTrace(sources, fb.task_id)).toBeUndefined();
  });
});

/** The store, and every commit made through it. */
