import { describe, expect, it, vi } from "vitest";
// The customer-support application's event types, which its role modules would define.
import "../../functions/roles/customer-support/events/index";
import { z } from "zod";
import { BusinessRejection, PermanentError, TransientError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { EventRegistry } from "../../schemas";
import { defineTaskEvents } from "../../schemas/events/task";
import { feedback, makeDeps, newTaskId, seedTask } from "./fixtures";

const viewOf = (store: ReturnType<typeof makeDeps>["store"], taskId: string) =>
  store.states.get(`task_view#${taskId}`)?.data as TaskView | undefined;

describe("consume: order and dedup", () => {
  it("applies a stream in order and records it in the checkpoint", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps);
    for (const e of events) expect((await consume(e, taskProjection, deps)).status).toBe("applied");
    const taskId = events[0]?.aggregate.id ?? "";
    const view = viewOf(store, taskId);
    expect(view?.status).toBe("delivered");
    expect(view?.history.map((h) => h.version)).toEqual([1, 2, 3, 4]);
    expect(
      store.checkpointOf({ type: "task_view", id: taskId }, { type: "task", id: taskId }),
    ).toBe(4);
    // The view's checkpoint records what it applied: no inbox row besides.
    expect(store.inbox.get(`task-projection#${events[2]?.event_id}`)).toBeUndefined();
  });

  it("acknowledges a redelivered event as a duplicate without touching state", async () => {
    const { deps, store } = makeDeps();
    const [first] = await seedTask(deps, 1);
    await consume(first, taskProjection, deps);
    const before = structuredClone(store.states);
    const again = await consume(first, taskProjection, deps);
    expect(again.status).toBe("duplicate");
    expect(store.states).toEqual(before);
  });

  it("fills a version gap from the event store, then treats the late originals as duplicates", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 3);
    const [v1, v2, v3] = events;
    const result = await consume(v3, taskProjection, deps);
    expect(result.status).toBe("applied");
    expect(result.steps.map((s) => [s.version, s.status, s.repaired])).toEqual([
      [1, "applied", true],
      [2, "applied", true],
      [3, "applied", false],
    ]);
    expect((await consume(v1, taskProjection, deps)).status).toBe("duplicate");
    expect((await consume(v2, taskProjection, deps)).status).toBe("duplicate");
    expect(viewOf(store, v1?.aggregate.id ?? "")?.history.map((h) => h.event_id)).toEqual(
      events.map((e) => e.event_id),
    );
  });

  it("retries later (transient) when the gap is not in the event store yet", async () => {
    const { deps } = makeDeps();
    const events = await seedTask(deps, 3);
    const orphan = { ...events[2], aggregate: { type: "task", id: newTaskId(), version: 3 } };
    await expect(consume(orphan, taskProjection, deps)).rejects.toMatchObject({
      code: "gate.gap_unrepairable",
      errorClass: "transient",
    });
  });

  it("skips event types the group does not subscribe to inside a gap", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 4);
    const late: Role<{ seen: string[] }> = {
      group: "late-only",
      subscriptions: ["task.accepted", "notification.sent"],
      decide: (state, event) => ({ state: { seen: [...(state?.seen ?? []), event.event_type] } }),
    };
    await consume(events[3], late, deps);
    const taskId = events[0]?.aggregate.id ?? "";
    expect(store.states.get(`task#${taskId}`)?.data).toMatchObject({
      seen: ["task.accepted", "notification.sent"],
    });
    const stream = { type: "task", id: taskId };
    expect(store.checkpointOf(stream, stream)).toBe(4);
  });

  it("de-duplicates unsequenced messages by event id through the inbox", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    const fb = feedback(taskId, 4);
    expect((await consume(fb, taskProjection, deps)).status).toBe("applied");
    expect((await consume(fb, taskProjection, deps)).status).toBe("duplicate");
    expect(viewOf(store, taskId)?.feedback).toEqual({ count: 1, rating_total: 4 });
  });

  it("forgets an inbox row once its TTL has passed", async () => {
    const { deps, clock } = makeDeps();
    const fb = feedback(newTaskId(), 4);
    await consume(fb, taskProjection, deps, { inboxTtlSeconds: 60 });
    clock.advance(61_000);
    expect((await consume(fb, taskProjection, deps, { inboxTtlSeconds: 60 })).status).toBe(
      "applied",
    );
  });
});

describe("consume: discards", () => {
  it("discards an expired event before deciding, records why, and moves the checkpoint", async () => {
    const { deps, store, clock } = makeDeps();
    const [v1] = await seedTask(deps, 1);
    const decide = vi.fn(taskProjection.decide);
    const expiring = { ...v1, expires_at: "2026-09-01T10:00:30.000Z" };
    clock.advance(31_000);
    const result = await consume(expiring, { ...taskProjection, decide }, deps);
    expect(result).toMatchObject({ status: "discarded", reason: "expired" });
    expect(decide).not.toHaveBeenCalled();
    expect(store.inbox.get(`task-projection#${v1?.event_id}`)).toMatchObject({
      outcome: "discarded",
      reason: "expired",
    });
    const taskId = v1?.aggregate.id ?? "";
    expect(
      store.checkpointOf({ type: "task_view", id: taskId }, { type: "task", id: taskId }),
    ).toBe(1);
  });

  it("discards what the role calls superseded, with the reason", async () => {
    const { deps, store } = makeDeps();
    const fb = feedback(newTaskId(), 2, { input_version: 1 });
    const role: Role<TaskView> = {
      ...taskProjection,
      discard: (_s, e) => ((e.input_version ?? 0) < 2 ? "superseded" : undefined),
    };
    expect(await consume(fb, role, deps)).toMatchObject({
      status: "discarded",
      reason: "superseded",
    });
    expect(store.inbox.get(`task-projection#${fb.event_id}`)?.reason).toBe("superseded");
  });

  it("commits the facts a role records of its discard with the discard, never deciding", async () => {
    const { deps, store } = makeDeps();
    const fb = feedback(newTaskId(), 2, { input_version: 1 });
    const decide = vi.fn(taskProjection.decide);
    const told = { conversation_id: "conv_1", superseded_by: "task_2" };
    const role: Role<TaskView> = {
      ...taskProjection,
      decide,
      discard: () => "superseded",
      discarded: (_s, _e, reason) =>
        reason === "superseded"
          ? { emit: [{ type: "support.superseded", payload: told }] }
          : undefined,
    };
    const result = await consume(fb, role, deps);
    expect(result).toMatchObject({ status: "discarded", reason: "superseded" });
    expect(decide).not.toHaveBeenCalled();
    expect(result.steps[0]?.emitted).toEqual([
      expect.objectContaining({ event_type: "support.superseded", causation_id: fb.event_id }),
    ]);
    expect(store.log.filter((e) => e.event_type === "support.superseded")).toHaveLength(1);
    expect(store.inbox.get(`task-projection#${fb.event_id}`)).toMatchObject({
      outcome: "discarded",
      reason: "superseded",
    });
    // Delivered again: a duplicate, nothing emitted twice.
    expect((await consume(fb, role, deps)).status).toBe("duplicate");
    expect(store.log.filter((e) => e.event_type === "support.superseded")).toHaveLength(1);
  });
});

describe("consume: invalid input is permanent", () => {
  const cases: [string, (e: Record<string, unknown>) => unknown, string][] = [
    ["missing task_id", ({ task_id: _, ...rest }) => rest, "envelope.invalid"],
    ["unknown type", (e) => ({ ...e, event_type: "task.exploded" }), "envelope.unknown_type"],
    [
      "unsupported schema version",
      (e) => ({ ...e, schema_version: 9 }),
      "envelope.unsupported_version",
    ],
    ["bad payload", (e) => ({ ...e, payload: { rating: 11 } }), "envelope.invalid_payload"],
    [
      "PII-looking id",
      (e) => ({ ...e, correlation_id: "user_138_phone_13800138000" }),
      "envelope.invalid",
    ],
    ["e-mail as id", (e) => ({ ...e, task_id: "task_bob@example.com" }), "envelope.invalid"],
    [
      "sequenced version on unsequenced type",
      (e) => ({ ...e, aggregate: { type: "task", id: "task_1", version: 2 } }),
      "envelope.invalid_sequence",
    ],
    [
      "over 256 KB",
      (e) => ({ ...e, payload: { rating: 3, comment: "x".repeat(300_000) } }),
      "envelope.too_large",
    ],
    ["not an object", () => "hello", "envelope.invalid"],
  ];
  it.each(cases)("%s", async (_name, mutate, code) => {
    const { deps } = makeDeps();
    const raw = mutate(feedback(newTaskId(), 3) as unknown as Record<string, unknown>);
    const error = await consume(raw, taskProjection, deps).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({ code });
  });

  it("refuses an event type the group does not subscribe to", async () => {
    const { deps } = makeDeps();
    const role: Role<unknown> = {
      group: "other",
      subscriptions: ["plan.created"],
      decide: () => ({}),
    };
    await expect(consume(feedback(newTaskId(), 3), role, deps)).rejects.toMatchObject({
      code: "routing.unsubscribed",
    });
  });
});

describe("consume: decisions, emits and conflicts", () => {
  const withRejected = () => {
    const registry = new EventRegistry();
    defineTaskEvents(registry);
    registry.define({
      type: "task.rejected",
      schemaVersion: 1,
      kind: "event",
      topic: "events",
      sequenced: true,
      description: "test",
      payload: z.object({ reason: z.string() }),
    });
    return registry;
  };

  it("appends emitted events at the next versions with causation and correlation carried", async () => {
    const { deps, store } = makeDeps();
    const fb = feedback(newTaskId(), 5);
    const role: Role<{ n: number }> = {
      group: "acceptor",
      subscriptions: ["task.feedback.received"],
      stateOf: (e) => ({ type: "task", id: e.aggregate.id }),
      decide: (s) => ({
        state: { n: (s?.n ?? 0) + 1 },
        emit: [
          { type: "task.accepted", payload: { title: "from feedback" } },
          { type: "plan.created", payload: { steps: [{ title: "a" }] } },
        ],
      }),
    };
    const result = await consume(fb, role, deps);
    const emitted = result.steps[0]?.emitted ?? [];
    expect(
      emitted.map((e) => [
        e.event_type,
        e.aggregate.version,
        e.causation_id,
        e.correlation_id,
        e.producer,
      ]),
    ).toEqual([
      ["task.accepted", 1, fb.event_id, fb.correlation_id, "acceptor"],
      ["plan.created", 2, fb.event_id, fb.correlation_id, "acceptor"],
    ]);
    expect(store.states.get(`task#${fb.aggregate.id}`)).toMatchObject({
      version: 2,
      revision: 1,
      data: { n: 1 },
    });
    expect(store.log.map((e) => e.event_id)).toEqual(emitted.map((e) => e.event_id));
  });

  it("refuses to emit an invalid payload (permanent)", async () => {
    const { deps } = makeDeps();
    const role: Role<unknown> = {
      group: "broken",
      subscriptions: ["task.feedback.received"],
      decide: () => ({ emit: [{ type: "plan.created", payload: { steps: [] } }] }),
    };
    await expect(consume(feedback(newTaskId(), 1), role, deps)).rejects.toMatchObject({
      code: "emit.invalid",
    });
  });

  it("commits a failure event for a business rejection instead of retrying", async () => {
    const { deps, store } = makeDeps();
    const registry = withRejected();
    const role: Role<unknown> = {
      group: "strict",
      subscriptions: ["task.feedback.received"],
      decide: () => {
        throw new BusinessRejection("task.closed", "task is closed", {
          type: "task.rejected",
          payload: { reason: "closed" },
        });
      },
    };
    const result = await consume(feedback(newTaskId(), 1), role, { ...deps, registry });
    expect(result).toMatchObject({ status: "rejected", reason: "task.closed" });
    expect(store.log.map((e) => e.event_type)).toEqual(["task.rejected"]);
  });

  it("reloads and decides again when another writer moved the state meanwhile", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    let calls = 0;
    const role: Role<{ n: number }> = {
      group: "counter",
      subscriptions: ["task.feedback.received"],
      async decide(state) {
        calls++;
        if (calls === 1) {
          // a concurrent writer commits first
          await store.commit({
            state: {
              aggregate: { type: "task", id: taskId },
              expectedRevision: 0,
              next: { n: 10 },
              version: 0,
            },
          });
        }
        return { state: { n: (state?.n ?? 0) + 1 } };
      },
    };
    const result = await consume(feedback(taskId, 1), role, deps);
    expect(result.status).toBe("applied");
    expect(calls).toBe(2);
    expect(store.states.get(`task#${taskId}`)).toMatchObject({ revision: 2, data: { n: 11 } });
  });

  it("gives up transiently after bounded conflict retries", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    let rev = 0;
    const role: Role<{ n: number }> = {
      group: "contended",
      subscriptions: ["task.feedback.received"],
      async decide() {
        await store.commit({
          state: {
            aggregate: { type: "task", id: taskId },
            expectedRevision: rev++,
            next: { n: rev },
            version: 0,
          },
        });
        return { state: { n: -1 } };
      },
    };
    const error = await consume(feedback(taskId, 1), role, deps, { maxConflictRetries: 2 }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ code: "commit.contention" });
    expect(rev).toBe(3);
  });

  it("lets errors from the decision propagate with their class", async () => {
    const { deps } = makeDeps();
    const role: Role<unknown> = {
      group: "flaky",
      subscriptions: ["task.feedback.received"],
      decide: () => {
        throw new TransientError("model.throttled", "429");
      },
    };
    await expect(consume(feedback(newTaskId(), 1), role, deps)).rejects.toMatchObject({
      errorClass: "transient",
    });
  });
});
