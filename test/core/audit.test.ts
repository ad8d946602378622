import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import { type AuditRecord, audit } from "../../functions/roles/audit";
import { registry } from "../../schemas";
import { feedback, makeDeps, newTaskId, seedTask } from "./fixtures";

describe("audit role", () => {
  it("subscribes to every registered event type", () => {
    expect([...audit.subscriptions].sort()).toEqual(
      [...new Set(registry.definitions().map((d) => d.type))].sort(),
    );
  });

  it("writes one causal record per event, once, without the payload", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 2);
    const fb = feedback(newTaskId(), 4, { payload: { rating: 4, comment: "private words" } });
    for (const e of [...events, fb, fb]) await consume(e, audit, deps);
    const records = [...store.states.entries()]
      .filter(([k]) => k.startsWith("audit_record#"))
      .map(([, v]) => v.data as AuditRecord);
    expect(records.map((r) => r.event_id).sort()).toEqual(
      [...events, fb].map((e) => e.event_id).sort(),
    );
    const plan = records.find((r) => r.event_type === "plan.created");
    expect(plan).toMatchObject({
      causation_id: events[0]?.event_id,
      aggregate: { version: 2 },
      producer: "task-api",
    });
    const feedbackRecord = records.find((r) => r.event_id === fb.event_id);
    expect(JSON.stringify(feedbackRecord)).not.toContain("private words");
    expect(feedbackRecord?.payload_bytes).toBeGreaterThan(0);
  });
});
