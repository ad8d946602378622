import { describe, expect, it } from "vitest";
import { failureRecordOf } from "../../functions/handlers/failure-record";
import { taskEvent, taskStream } from "../support/factories";

const context = {
  group: "audit",
  error: { code: "envelope.invalid", message: "x".repeat(5000), errorClass: "permanent" as const },
  attempts: 3,
  outcome: "dead-lettered" as const,
  now: new Date("2026-11-30T12:00:00.000Z"),
  ttlSeconds: 60,
};

describe("failureRecordOf", () => {
  it("reads the ids a trace needs from a bare envelope or an EventBridge event, with a bounded error", () => {
    const e = taskStream(1, 2)[1] as ReturnType<typeof taskEvent>;
    expect(e.causation_id).toEqual(expect.any(String));
    for (const body of [
      JSON.stringify(e),
      JSON.stringify({ "detail-type": e.event_type, detail: e }),
    ]) {
      const record = failureRecordOf(body, context);
      expect(record).toMatchObject({
        group: "audit",
        eventId: e.event_id,
        eventType: e.event_type,
        aggregate: { type: "task", id: e.aggregate.id },
        version: 2,
        correlationId: e.correlation_id,
        taskId: e.task_id,
        causationId: e.causation_id,
        outcome: "dead-lettered",
        attempts: 3,
        recordedAt: "2026-11-30T12:00:00.000Z",
        expiresAt: Date.parse("2026-11-30T12:00:00.000Z") / 1000 + 60,
      });
      expect(record?.error.message).toHaveLength(1000);
    }
  });

  it("keeps a message whose causation id is null, and skips bodies without the ids", () => {
    const e = { ...taskEvent(1), causation_id: null };
    expect(failureRecordOf(JSON.stringify(e), context)?.causationId).toBeUndefined();
    expect(failureRecordOf("{ not json", context)).toBeUndefined();
    expect(failureRecordOf(JSON.stringify({ event_id: "x" }), context)).toBeUndefined();
    expect(
      failureRecordOf(JSON.stringify({ ...e, correlation_id: "c".repeat(300) }), context),
    ).toBeUndefined();
  });
});
