import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendToStream } from "../../functions/core/producer";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import { defineEventType, streamFact } from "../../functions/kit";
import {
  AUDIT_GROUP,
  type AuditRecord,
  audit,
  auditRecordRef,
} from "../../functions/roles/audit/audit";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { meter } from "../../lib/dev/metering/metering";
import { topology } from "../../lib/infra/project";
import { defineTopology } from "../../lib/infra/topology";
import { envelopeBytes, MAX_ENVELOPE_BYTES, registry } from "../../schemas";
import * as z from "../../schemas/zod";
import { emulator } from "../support/aws";

/**
 * The claim check end to end on the local runtime: an event over the bus's 256 KB, appended to its
 * stream, goes through the relay, EventBridge and a consumer group's queue as its claim (one
 * PutEvents entry of one 64 KB chunk), and the group's consumer reads it whole from the stream.
 * The audit group, which records a stored event delivered to it with the size of its payload, is
 * the consumer, on a topology whose audit group receives stored events too (the reference stack's
 * receives only unsequenced messages). (moto enforces neither PutEvents' size limit nor, for a
 * rule's delivery, SQS's.)
 */
const bulkRecorded = defineEventType({
  ...streamFact,
  type: "bulk.recorded",
  description: "A large text was recorded (a test type).",
  payload: z.object({ text: z.string() }),
});

/** The reference topology with an audit group whose rules match every registered type. */
function auditingStoredEvents() {
  const { keepsMessages: _, ...ofEveryEvent } = audit;
  return defineTopology({
    topics: topology.topics,
    groups: topology.groups.map((g) => (g.name === AUDIT_GROUP ? { ...g, role: ofEveryEvent } : g)),
  });
}

describe("the claim check on the local runtime", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `cc${ulid().slice(-6).toLowerCase()}`,
      topology: auditingStoredEvents(),
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("an event too large for the bus travels as its claim and is read whole by its consumer", async () => {
    await env.runtime.idle();
    const published = meter(env.clients.eventbridge);
    published.reset();
    const taskId = `task_${ulid()}`;
    const text = "a large recorded text ".repeat(14_000);
    const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
    const [event] = await appendToStream(deps, {
      aggregate: { type: "task", id: taskId },
      producer: "bulk-writer",
      correlationId: `corr_${ulid()}`,
      taskId,
      decide: () => ({ state: { n: 1 }, emit: [{ type: bulkRecorded.type, payload: { text } }] }),
    });
    if (!event) throw new Error("nothing was appended");
    expect(envelopeBytes(event)).toBeGreaterThan(MAX_ENVELOPE_BYTES);
    const ref = auditRecordRef(event.event_id);
    let record: AuditRecord | undefined;
    await waitUntil(`the audit record of ${event.event_id}`, async () => {
      record = (await env.store.load({ state: ref })).state?.data as AuditRecord | undefined;
      return record !== undefined;
    });
    expect(record).toMatchObject({
      event_id: event.event_id,
      event_type: "bulk.recorded",
      payload_bytes: Buffer.byteLength(JSON.stringify({ text })),
    });
    await env.runtime.idle();
    // One entry of one 64 KB chunk: the claim, not the 300 KB event.
    expect(published.snapshot().calls.PutEvents).toBe(1);
    expect(published.snapshot().billed.PutEvents).toBe(1);
  }, 180_000);
});
