import { describe, expect, it } from "vitest";
import * as z from "zod";
import { InMemoryEventStore } from "../../functions/core/memory";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
// order.lookup.completed, a type of the customer-support application, with two versions.
import "../../functions/roles/customer-support/events/index";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { rebuild } from "../../lib/operator/rebuild";
import { buildTrace } from "../../lib/operator/trace";
import { type Envelope, EventRegistry, registry } from "../../schemas";
import { newTaskId, taskEvent, taskStream } from "../support/factories";

/** A stored v1 `plan.created` (steps as bare titles), as an older producer wrote it. */
function planV1(taskId: string, version = 2, occurredAt?: Date): Envelope {
  const v2 = taskEvent(version, { taskId, type: "plan.created", occurredAt });
  return { ...v2, schema_version: 1, payload: { steps: ["outline", "draft"] } } as Envelope;
}

const PLAN_V2 = { steps: [{ title: "outline" }, { title: "draft" }] };

/** A role that records the payloads it is given. */
function recorder(): Role<null> & { seen: unknown[] } {
  const seen: unknown[] = [];
  return {
    group: "plan-reader",
    subscriptions: ["task.accepted", "plan.created"],
    stateOf: (event) => ({ type: "plan_seen", id: event.task_id }),
    decide: (_state, event) => {
      seen.push({ type: event.event_type, version: event.schema_version, payload: event.payload });
      return { state: null };
    },
    seen,
  };
}

function setup() {
  const clock = new ManualClock("2026-09-01T10:00:00.000Z");
  const store = new InMemoryEventStore(clock);
  return { store, deps: { store, registry, clock, ids: ulidSource(clock) } };
}

describe("event registry upcasting", () => {
  it("reads a v1 message at the newest version, validated, and says where it came from", () => {
    const v1 = planV1(newTaskId());
    const parsed = registry.parse(v1);
    expect(parsed).toMatchObject({
      ok: true,
      upcastFrom: 1,
      envelope: { schema_version: 2, payload: PLAN_V2, event_id: v1.event_id },
      definition: { type: "plan.created", schemaVersion: 2 },
    });
    expect(registry.upcast(v1)).toMatchObject({ schema_version: 2, payload: PLAN_V2 });
    const newest = taskEvent(2, { type: "plan.created" });
    expect(registry.upcast(newest)).toBe(newest);
  });

  it("fills a field v1 implied from the envelope (order lookup's time)", () => {
    const parsed = registry.parse({
      ...taskEvent(1),
      event_type: "order.lookup.completed",
      schema_version: 1,
      aggregate: { type: "order_lookup", id: "task_x1", version: 1 },
      occurred_at: "2026-09-01T09:00:00.000Z",
      payload: { conversation_id: "conv_1", order_id: "123", found: false },
    });
    expect(parsed.ok && parsed.envelope.payload).toEqual({
      conversation_id: "conv_1",
      order_id: "123",
      found: false,
      looked_up_at: "2026-09-01T09:00:00.000Z",
    });
  });

  it("renames a field of a command old clients still send (workflow.start.requested v1)", () => {
    const parsed = registry.parse({
      ...taskEvent(1),
      event_type: "workflow.start.requested",
      schema_version: 1,
      aggregate: { type: "dag_run", id: "run_1", version: 0 },
      payload: { run_id: "run_1", workflow: "quick-news", request: { topic_hint: "tides" } },
    });
    expect(parsed.ok && parsed.envelope.payload).toEqual({
      run_id: "run_1",
      workflow_name: "quick-news",
      request: { topic_hint: "tides" },
    });
  });

  it("applies a chain of upcasters in order, and refuses a broken chain at definition", () => {
    const r = new EventRegistry();
    const base = { type: "demo.made", kind: "event", topic: "events", sequenced: true } as const;
    const d = { ...base, description: "demo" };
    r.define({ ...d, schemaVersion: 1, payload: z.object({ n: z.number() }) });
    expect(() =>
      r.define({ ...d, schemaVersion: 3, payload: z.object({}), upcast: () => ({}) }),
    ).toThrow(/in order from 1 \(next is v2\)/);
    expect(() => r.define({ ...d, schemaVersion: 2, payload: z.object({}) })).toThrow(
      /needs an upcast from v1/,
    );
    r.define({
      ...d,
      schemaVersion: 2,
      payload: z.object({ count: z.number() }),
      upcast: (p) => ({ count: (p as { n: number }).n }),
    });
    r.define({
      ...d,
      schemaVersion: 3,
      payload: z.object({ count: z.number(), unit: z.string() }),
      upcast: (p) => ({ ...(p as { count: number }), unit: "items" }),
    });
    const v1 = { ...taskEvent(1), event_type: "demo.made", schema_version: 1, payload: { n: 4 } };
    expect(r.parse(v1)).toMatchObject({
      ok: true,
      upcastFrom: 1,
      envelope: { schema_version: 3, payload: { count: 4, unit: "items" } },
    });
    const other = new EventRegistry();
    expect(() =>
      other.define({ ...d, schemaVersion: 1, payload: z.object({}), upcast: () => ({}) }),
    ).toThrow(/nothing to upcast from/);
  });

  it("refuses a message whose upcast result is invalid, with a clear error", () => {
    const r = new EventRegistry();
    const d = { type: "demo.made", kind: "event", topic: "events", sequenced: true } as const;
    r.define({ ...d, description: "", schemaVersion: 1, payload: z.object({ n: z.number() }) });
    r.define({
      ...d,
      description: "",
      schemaVersion: 2,
      payload: z.object({ count: z.number() }),
      upcast: () => ({ count: "four" }) as unknown as { count: number },
    });
    const v1 = { ...taskEvent(1), event_type: "demo.made", schema_version: 1, payload: { n: 4 } };
    expect(r.parse(v1)).toMatchObject({
      ok: false,
      code: "envelope.upcast_failed",
      message: expect.stringMatching(/demo.made v1 could not be upcast to v2/),
      eventId: v1.event_id,
    });
  });
});

describe("v1 events in the store are read as v2 on every path", () => {
  it("delivery and replay: the role sees the newest shape", async () => {
    const { deps } = setup();
    const role = recorder();
    const taskId = newTaskId();
    await consume(taskEvent(1, { taskId }), role, deps);
    await consume(planV1(taskId), role, deps);
    const replayed = planV1(newTaskId(), 1);
    const replay = { name: "replay-1", time: "2026-09-01T10:00:00.000Z" };
    const other = recorder();
    await consume(replayed, other, deps, { replay });
    expect(role.seen.at(-1)).toEqual({ type: "plan.created", version: 2, payload: PLAN_V2 });
    expect(other.seen).toEqual([{ type: "plan.created", version: 2, payload: PLAN_V2 }]);
  });

  it("gap repair: events read from the store to fill a gap are upcast too", async () => {
    const { store, deps } = setup();
    const taskId = newTaskId();
    const [accepted] = taskStream(1, 1, { taskId });
    const plan = planV1(taskId, 2);
    const answer = taskEvent(3, { taskId, type: "answer.generated" });
    await store.commit({ append: [accepted as Envelope, plan, answer] });
    const role = {
      ...recorder(),
      subscriptions: ["task.accepted", "plan.created", "answer.generated"],
    };
    const result = await consume(answer, role, deps);
    expect(result.steps.map((s) => [s.eventType, s.repaired])).toEqual([
      ["task.accepted", true],
      ["plan.created", true],
      ["answer.generated", false],
    ]);
    expect(role.seen[1]).toEqual({ type: "plan.created", version: 2, payload: PLAN_V2 });
  });

  it("rebuild: a projection rebuilt from v1 events folds the newest shape", async () => {
    const { store } = setup();
    const taskId = newTaskId();
    const [accepted] = taskStream(1, 1, { taskId });
    await store.commit({ append: [accepted as Envelope, planV1(taskId, 2)] });
    const progress = await rebuild(store, store, taskProjection as Role<unknown>, "task");
    expect(progress).toMatchObject({ applied: 2, done: true });
    const view = (await store.load({ state: { type: "task_view", id: taskId } })).state
      ?.data as TaskView;
    expect(view).toMatchObject({ status: "planned", plan_steps: 2, plan: ["outline", "draft"] });
  });

  it("trace: a stored v1 event shows at v2, marked with the version it was stored in", async () => {
    const { store } = setup();
    const taskId = newTaskId();
    const [accepted] = taskStream(1, 1, { taskId });
    const plan = {
      ...planV1(taskId, 2),
      correlation_id: accepted?.correlation_id,
      causation_id: accepted?.event_id,
    } as Envelope;
    await store.commit({ append: [accepted as Envelope, plan] });
    const view = await buildTrace(
      { reader: store, groups: [], sideEffects: async () => [] },
      taskId,
    );
    const events = JSON.stringify(view);
    expect(view?.roots[0]?.event).not.toHaveProperty("storedSchemaVersion");
    expect(view?.roots[0]?.children[0]?.event).toMatchObject({
      eventType: "plan.created",
      storedSchemaVersion: 1,
    });
    expect(events).toContain(plan.event_id);
  });
});
