import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { CommitRequest, EventStore } from "../../functions/core/ports";
import { audit, auditRecordRef, outcomeOfAuditRecord } from "../../functions/roles/audit";
import { taskProjection } from "../../functions/roles/task-projection";
import { selfRecordedOutcomes } from "../../lib/ops/self-recorded";
import { buildTrace } from "../../lib/ops/trace";
import type { Envelope } from "../../schemas";
import { makeDeps, seedTask } from "./fixtures";

/**
 * The audit group writes one item per event and nothing else: its record is its dedup and its
 * trace record (Role.selfRecorded), so an audited event costs one read and one write.
 */
describe("states that record what their group applied stand in for inbox rows", () => {
  it("commits each event with its record alone; a copy is a duplicate found by the read", async () => {
    const { deps, store } = makeDeps();
    const [v1, v2] = await seedTask(deps, 2);
    const commits: CommitRequest[] = [];
    const counting: EventStore = {
      load: (r) => store.load(r),
      readStream: (...a) => store.readStream(...a),
      commit: (r) => {
        commits.push(r);
        return store.commit(r);
      },
    };
    const withCount = { ...deps, store: counting };
    for (const e of [v2, v1, v2, v1]) await consume(e, audit, withCount);
    expect(commits).toHaveLength(2);
    for (const c of commits) {
      expect(c.recordedByState).toBe(true);
      expect([c.checkpoint, c.gate, c.append]).toEqual([undefined, undefined, undefined]);
      expect(c.state?.expectedRevision).toBe(0);
    }
    expect(await store.inboxRecords("audit", [v1?.event_id ?? "", v2?.event_id ?? ""])).toEqual([]);
    const outcomes = await selfRecordedOutcomes(["audit"], store)?.(
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
      selfRecorded: selfRecordedOutcomes(["audit"], store),
    };
    const byEvent = await buildTrace(sources, id);
    expect(byEvent?.roots[0]?.outcomes).toMatchObject([{ group: "audit", outcome: "applied" }]);
    const byTask = await buildTrace(sources, v1?.task_id ?? "");
    expect(byTask?.roots[0]?.outcomes).toMatchObject([{ group: "audit", outcome: "applied" }]);
    // Without the records, the group's outcome is not known.
    const without = await buildTrace({ ...sources, selfRecorded: undefined }, v1?.task_id ?? "");
    expect(without?.roots[0]?.outcomes).toEqual([]);
    expect(selfRecordedOutcomes(["sender"], store)).toBeUndefined();
    expect(auditRecordRef(id)).toEqual({ type: "audit_record", id: `evt_${id}` });
  });

  it("a projection's checkpoint records what it applied: no inbox row, the trace derives it", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 3);
    const [v1, v2, v3] = events as [Envelope, Envelope, Envelope];
    for (const e of [v1, v2]) await consume(e, taskProjection, deps);
    expect(await store.inboxRecords("task-projection", [v1.event_id, v2.event_id])).toEqual([]);
    const derive = selfRecordedOutcomes(["task-projection"], store);
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
        selfRecorded: derive,
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
});
