import { beforeEach, describe, expect, it } from "vitest";
import { InMemoryEventStore } from "../../functions/core/memory";
import type { FailureRecord, InboxRecord, RecordedOutcome } from "../../functions/core/ports";
import { renderTraceText } from "../../lib/operator/render-text";
import { buildTrace, groupOutcomes, type TraceSources } from "../../lib/operator/trace";
import type { SideEffectView, TraceNode } from "../../lib/operator/views";
import type { Envelope } from "../../schemas";
import {
  feedbackEvent,
  inboxRecordOf,
  newCorrelationId,
  newTaskId,
  newUlid,
  taskEvent,
  taskStream,
} from "../support/factories";

const AT = "2026-11-30T12:00:00.000Z";

function inbox(
  group: string,
  e: Envelope,
  outcome: RecordedOutcome = "applied",
  reason?: string,
  recordedAt = AT,
): InboxRecord {
  return inboxRecordOf(group, e, outcome, reason, recordedAt);
}

function failure(
  group: string,
  e: Envelope,
  outcome: FailureRecord["outcome"],
  attempts: number,
): FailureRecord {
  const { outcome: _o, reason: _r, ...fields } = inbox(group, e);
  return { ...fields, outcome, attempts, error: { code: "gate.gap_unrepairable", message: "gap" } };
}

const ids = (nodes: readonly TraceNode[]): unknown[] =>
  nodes.map((n) => ({ id: n.event.eventId, children: ids(n.children) }));

describe("buildTrace: the causal tree of an event, task or correlation", () => {
  let store: InMemoryEventStore;
  let sources: TraceSources;
  let effects: SideEffectView[];
  const taskId = newTaskId();
  const correlationId = newCorrelationId();
  let client: Envelope;
  let stream: Envelope[];

  beforeEach(async () => {
    store = new InMemoryEventStore();
    effects = [];
    sources = {
      reader: store,
      groups: ["audit", "projection", "sender"],
      sideEffects: async (keys) => effects.filter((s) => keys.includes(s.key)),
      stream: async (ref) =>
        store.log.filter((e) => e.aggregate.type === ref.type && e.aggregate.id === ref.id),
    };
    client = feedbackEvent({ taskId, correlationId });
    stream = taskStream(1, 3, { taskId, correlationId, causationId: client.event_id });
    await store.commit({ append: stream });
    const [e1, e2, e3] = stream as [Envelope, Envelope, Envelope];
    await store.commit({ inbox: inbox("audit", client) });
    await store.commit({ inbox: inbox("projection", e1) });
    await store.commit({ inbox: inbox("projection", e2, "discarded", "superseded") });
    await store.record(failure("audit", e3, "retrying", 2));
    await store.commit({ inbox: inbox("audit", e3) });
    await store.record(failure("projection", e3, "dead-lettered", 5));
  });

  it("places the unsequenced client message at the root and each event under its cause", async () => {
    const view = await buildTrace(sources, correlationId);
    const [e1, e2, e3] = stream as [Envelope, Envelope, Envelope];
    expect(ids(view?.roots ?? [])).toEqual([
      {
        id: client.event_id,
        children: [
          {
            id: e1.event_id,
            children: [{ id: e2.event_id, children: [{ id: e3.event_id, children: [] }] }],
          },
        ],
      },
    ]);
    expect(view?.correlationIds).toEqual([correlationId]);
    expect(view?.taskIds).toEqual([taskId]);
    expect(view?.roots[0]?.event).toMatchObject({ version: 0, eventType: client.event_type });
  });

  it("finds the same trace by task id and by any event id in it; nothing for an unknown id", async () => {
    const byCorrelation = await buildTrace(sources, correlationId);
    const byTask = await buildTrace(sources, taskId);
    const byEvent = await buildTrace(sources, (stream[1] as Envelope).event_id);
    expect(ids(byTask?.roots ?? [])).toEqual(ids(byCorrelation?.roots ?? []));
    expect(ids(byEvent?.roots ?? [])).toEqual(ids(byCorrelation?.roots ?? []));
    expect(await buildTrace(sources, newUlid())).toBeUndefined();
    expect(await buildTrace(sources, newCorrelationId())).toBeUndefined();
  });

  it("gives each group's outcome: applied after retries, discarded with its reason, dead-lettered", async () => {
    const view = await buildTrace(sources, correlationId);
    const e2 = view?.roots[0]?.children[0]?.children[0];
    const e3 = e2?.children[0];
    expect(e2?.outcomes).toEqual([
      { group: "projection", outcome: "discarded", reason: "superseded", at: AT },
    ]);
    expect(e3?.outcomes).toEqual([
      {
        group: "audit",
        outcome: "applied",
        error: { code: "gate.gap_unrepairable", message: "gap" },
        attempts: 2,
        at: AT,
      },
      {
        group: "projection",
        outcome: "dead-lettered",
        reason: "gate.gap_unrepairable",
        error: { code: "gate.gap_unrepairable", message: "gap" },
        attempts: 5,
        at: AT,
      },
    ]);
    expect(e3?.deadLetters).toEqual([{ group: "projection", queue: "queue" }]);
    const text = renderTraceText(view as NonNullable<typeof view>);
    expect(text).toContain("projection: discarded: superseded");
    expect(text).toContain("projection: dead-lettered after 5 receive(s): gate.gap_unrepairable");
    expect(text).toContain("audit: applied (after 2 receive(s), last error gate.gap_unrepairable)");
  });

  it("names the tenant of an event that carries one", async () => {
    const tenanted = {
      ...taskEvent(4, { taskId, correlationId, causationId: (stream[2] as Envelope).event_id }),
      tenant_id: "acme",
    };
    await store.commit({ append: [tenanted] });
    const view = await buildTrace(sources, correlationId);
    const text = renderTraceText(view as NonNullable<typeof view>);
    expect(text).toContain(`${tenanted.event_id} by ${tenanted.producer} for tenant acme at `);
    // Events without a tenant say nothing of one.
    expect(text.match(/for tenant/g)).toHaveLength(1);
  });

  it("shows the side-effect records a delivery names", async () => {
    const delivered = taskEvent(4, {
      taskId,
      correlationId,
      causationId: (stream[2] as Envelope).event_id,
    });
    const withKey = {
      ...delivered,
      payload: { ...(delivered.payload as object), idempotency_key: `${taskId}:reply:1` },
    };
    await store.commit({ append: [withKey] });
    effects = [{ key: `${taskId}:reply:1`, state: "succeeded", attempts: 1, updatedAt: AT }];
    const view = await buildTrace(sources, correlationId);
    const node = view?.roots[0]?.children[0]?.children[0]?.children[0]?.children[0];
    expect(node?.event.eventId).toBe(delivered.event_id);
    expect(node?.sideEffects).toEqual(effects);
  });

  it("lists what the trace made moot: another trace's message discarded as superseded after it began", async () => {
    const older = taskEvent(4, { taskId, correlationId: newCorrelationId() });
    await store.commit({ append: [older] });
    await store.commit({
      inbox: inbox("sender", older, "discarded", "superseded", "2099-01-01T00:00:00.000Z"),
    });
    const unrelated = taskEvent(1, { correlationId: newCorrelationId() });
    await store.commit({
      inbox: inbox("sender", unrelated, "discarded", "superseded", "2099-01-01T00:00:00.000Z"),
    });
    const view = await buildTrace(sources, correlationId);
    expect(view?.related?.map((n) => n.event.eventId)).toEqual([older.event_id]);
    expect(view?.related?.[0]?.outcomes[0]).toMatchObject({
      group: "sender",
      reason: "superseded",
    });
  });
});

describe("buildTrace of a conversation id", () => {
  it("gives the traces of the conversation's messages, found through its stream", async () => {
    const store = new InMemoryEventStore();
    const conversation = { type: "conversation", id: `conv_${newUlid()}` };
    const [a, b] = [newCorrelationId(), newCorrelationId()].map((correlationId, i) => {
      const e = taskEvent(1, { correlationId });
      return { ...e, aggregate: { ...conversation, version: i + 1 } };
    }) as [Envelope, Envelope];
    await store.commit({ append: [a, b] });
    const view = await buildTrace(
      {
        reader: store,
        groups: [],
        sideEffects: async () => [],
        stream: async (ref) => store.log.filter((e) => e.aggregate.id === ref.id),
      },
      conversation.id,
    );
    expect(view?.correlationIds).toEqual([a.correlation_id, b.correlation_id].sort());
    expect(view?.roots.map((r) => r.event.eventId).sort()).toEqual([a.event_id, b.event_id].sort());
  });
});

describe("groupOutcomes", () => {
  it("keeps a retrying record as the outcome until the group applies the event", () => {
    const e = taskEvent(1);
    expect(groupOutcomes([failure("g", e, "retrying", 3)])).toEqual([
      {
        group: "g",
        outcome: "retrying",
        error: { code: "gate.gap_unrepairable", message: "gap" },
        attempts: 3,
        at: AT,
      },
    ]);
  });
});
