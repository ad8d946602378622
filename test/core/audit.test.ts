import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { CommitRequest, EventStore } from "../../functions/core/ports";
import { audit, auditRecordRef, outcomeOfAuditRecord } from "../../functions/roles/audit";
import { auditOutcomes } from "../../lib/ops/audit-records";
import { buildTrace } from "../../lib/ops/trace";
import { makeDeps, seedTask } from "./fixtures";

/**
 * The audit group writes one item per event and nothing else: its record is its dedup and its
 * trace record (Role.selfRecorded), so an audited event costs one read and one write.
 */
describe("audit records stand in for inbox rows", () => {
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
    const outcomes = await auditOutcomes(["audit"], store)?.([v1?.event_id ?? "", "unknown"]);
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
      selfRecorded: auditOutcomes(["audit"], store),
    };
    const byEvent = await buildTrace(sources, id);
    expect(byEvent?.roots[0]?.outcomes).toMatchObject([{ group: "audit", outcome: "applied" }]);
    const byTask = await buildTrace(sources, v1?.task_id ?? "");
    expect(byTask?.roots[0]?.outcomes).toMatchObject([{ group: "audit", outcome: "applied" }]);
    // Without the records, the group's outcome is not known.
    const without = await buildTrace({ ...sources, selfRecorded: undefined }, v1?.task_id ?? "");
    expect(without?.roots[0]?.outcomes).toEqual([]);
    expect(auditOutcomes(["task-projection"], store)).toBeUndefined();
    expect(auditRecordRef(id)).toEqual({ type: "audit_record", id: `evt_${id}` });
  });
});
