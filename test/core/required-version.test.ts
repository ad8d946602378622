import { describe, expect, it } from "vitest";
import { buildEmitted } from "../../functions/core/emit";
import { AgentBusError, PermanentError, TransientError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { EventStore, LoadRequest } from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { type Envelope, type RequiredVersion, registry } from "../../schemas";
import { feedback, makeDeps, newCorrelationId, newTaskId, seedTask } from "./fixtures";

type Deps = ReturnType<typeof makeDeps>;

const viewOf = (store: Deps["store"], taskId: string) =>
  store.states.get(`task_view#${taskId}`)?.data as TaskView | undefined;

/** The store, with every load request it was given kept in order. */
function loadCounting(store: EventStore): { store: EventStore; loads: LoadRequest[] } {
  const loads: LoadRequest[] = [];
  return {
    loads,
    store: {
      load: (r) => {
        loads.push(r);
        return store.load(r);
      },
      readStream: (...a) => store.readStream(...a),
      commit: (r) => store.commit(r),
    },
  };
}

/** A rating for task `onTask` that waits for task `waitsFor` to reach `version`. */
function waitingFeedback(onTask: string, waitsFor: string, version: number): Envelope {
  const required_version: RequiredVersion = { type: "task", id: waitsFor, version };
  return feedback(onTask, 4, { required_version });
}

async function caught(work: Promise<unknown>): Promise<AgentBusError> {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof AgentBusError)) throw new Error(`expected an AgentBusError: ${error}`);
  return error;
}

describe("required_version: the envelope", () => {
  const base = feedback(newTaskId(), 3);

  it("accepts a state named as the envelope names its own aggregate, at version 1 or more", () => {
    const parsed = registry.parse({
      ...base,
      required_version: { type: "task", id: newTaskId(), version: 8 },
    });
    expect(parsed.ok && parsed.envelope.required_version?.version).toBe(8);
  });

  it.each([
    ["version 0", { type: "task", id: "task_1", version: 0 }, "required_version.version"],
    ["no type", { id: "task_1", version: 3 }, "required_version.type"],
    ["a bad id", { type: "task", id: "a b", version: 3 }, "required_version.id"],
  ])("refuses %s, naming the field", (_, required_version, field) => {
    const parsed = registry.parse({ ...base, required_version });
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.message).toContain(field);
  });

  it("is set on what a role or producer emits (EmitSpec.requiredVersion)", async () => {
    const { deps } = makeDeps();
    const taskId = newTaskId();
    const requiredVersion = { type: "reply", id: taskId, version: 2 };
    const [emitted] = buildEmitted(
      [{ type: "task.accepted", payload: { title: "t" }, requiredVersion }],
      null,
      { type: "task", id: taskId },
      0,
      { producer: "task-api", now: deps.clock.now(), attempt: 1, root: rootOf(taskId) },
      deps,
    );
    expect(emitted?.required_version).toEqual(requiredVersion);
  });
});

const rootOf = (taskId: string) => ({ correlationId: newCorrelationId(), taskId });

describe("required_version: the consumer holds a message until the state reaches it", () => {
  it("applies at once a message whose state is already there, for one read of that state", async () => {
    const { deps, store } = makeDeps();
    const [first] = await seedTask(deps, 2);
    const prerequisite = first?.aggregate.id ?? "";
    const onTask = newTaskId();
    const counting = loadCounting(store);
    const plain = await consume(feedback(onTask, 4), taskProjection, {
      ...deps,
      store: counting.store,
    });
    const loadsOfPlain = counting.loads.length;
    const waiting = await consume(waitingFeedback(onTask, prerequisite, 2), taskProjection, {
      ...deps,
      store: counting.store,
    });
    expect([plain.status, waiting.status]).toEqual(["applied", "applied"]);
    // One more read than the same message without the requirement: of the named state alone.
    const loadsOfWaiting = counting.loads.slice(loadsOfPlain);
    expect(loadsOfWaiting).toHaveLength(loadsOfPlain + 1);
    expect(loadsOfWaiting.at(-1)).toEqual({ state: { type: "task", id: prerequisite } });
    expect(viewOf(store, onTask)?.feedback.count).toBe(2);
  });

  it("reads nothing more when the named state is the one the delivery reads", async () => {
    const { deps, store } = makeDeps();
    const onTask = newTaskId();
    await consume(feedback(onTask, 4), taskProjection, deps); // task_view#onTask at version 0
    const counting = loadCounting(store);
    const message = feedback(onTask, 5, {
      required_version: { type: "task_view", id: onTask, version: 1 },
    });
    const error = await caught(
      consume(message, taskProjection, { ...deps, store: counting.store }),
    );
    expect(error.code).toBe("ordering.required_version_pending");
    expect(counting.loads).toHaveLength(1);
  });

  it("holds a message whose state is behind: nothing applied or recorded, a transient error naming it", async () => {
    const { deps, store } = makeDeps();
    const [first] = await seedTask(deps, 1);
    const prerequisite = first?.aggregate.id ?? "";
    const onTask = newTaskId();
    const message = waitingFeedback(onTask, prerequisite, 3);
    const statesBefore = structuredClone(store.states);
    const inboxBefore = structuredClone(store.inbox);

    const error = await caught(consume(message, taskProjection, deps, { receiveCount: 2 }));
    expect(error).toBeInstanceOf(TransientError);
    expect(error.code).toBe("ordering.required_version_pending");
    expect(error.message).toContain(`task/${prerequisite} to reach version 3`);
    expect(error.message).toContain("at version 1");
    expect(error.details).toMatchObject({
      aggregate: `task/${prerequisite}`,
      required: 3,
      found: 1,
    });
    expect(store.states).toEqual(statesBefore);
    expect(store.inbox).toEqual(inboxBefore);
  });

  it("applies the held message once redelivered after the state reached the version, and only once", async () => {
    const { deps, store } = makeDeps();
    const taskId = newTaskId();
    const onTask = newTaskId();
    const message = waitingFeedback(onTask, taskId, 2);
    await expect(consume(message, taskProjection, deps)).rejects.toThrow(/held/);
    await seedTask(deps, 2, taskId);
    expect((await consume(message, taskProjection, deps)).status).toBe("applied");
    expect((await consume(message, taskProjection, deps)).status).toBe("duplicate");
    expect(viewOf(store, onTask)?.feedback).toEqual({ count: 1, rating_total: 4 });
  });

  it("holds a message whose state does not exist yet (found version 0)", async () => {
    const { deps } = makeDeps();
    const error = await caught(
      consume(waitingFeedback(newTaskId(), newTaskId(), 1), taskProjection, deps),
    );
    expect(error.details).toMatchObject({ required: 1, found: 0 });
  });

  it("gives up on the last attempt with a permanent timeout naming the aggregate and both versions", async () => {
    const { deps, store } = makeDeps();
    const [first] = await seedTask(deps, 1);
    const prerequisite = first?.aggregate.id ?? "";
    const message = waitingFeedback(newTaskId(), prerequisite, 3);
    const error = await caught(
      consume(message, taskProjection, deps, { receiveCount: 5, lastAttempt: true }),
    );
    expect(error).toBeInstanceOf(PermanentError);
    expect(error.code).toBe("ordering.required_version_timeout");
    expect(error.message).toContain(`task/${prerequisite} to reach version 3`);
    expect(error.message).toContain("still at version 1 on the last attempt");
    expect(error.details).toMatchObject({ aggregate: `task/${prerequisite}`, required: 3 });
    expect(store.inbox.size).toBe(0);
  });

  it("does not hold an expired message: it is discarded as expired", async () => {
    const { deps } = makeDeps();
    const message = {
      ...waitingFeedback(newTaskId(), newTaskId(), 3),
      expires_at: "2026-09-01T09:00:00.000Z",
    };
    const result = await consume(message, taskProjection, deps);
    expect([result.status, result.reason]).toEqual(["discarded", "expired"]);
  });

  it("does not hold a message for a role that needs no order (unordered)", async () => {
    const { deps } = makeDeps();
    const unordered = { ...taskProjection, unordered: true as const };
    const result = await consume(waitingFeedback(newTaskId(), newTaskId(), 3), unordered, deps);
    expect(result.status).toBe("applied");
  });

  it("holds an event a gap repair reads from the store when it waits, naming it", async () => {
    const { deps, store } = makeDeps();
    const prerequisite = newTaskId();
    const taskId = newTaskId();
    const requiredVersion = { type: "task", id: prerequisite, version: 1 };
    const steps = [
      { type: "task.accepted", payload: { title: "t" } },
      { type: "plan.created", payload: { steps: [{ title: "a" }] }, requiredVersion },
      { type: "answer.generated", payload: { answer_ref: "ans_1" } },
    ];
    const events = await appendToStream(deps, {
      aggregate: { type: "task", id: taskId },
      producer: "task-api",
      correlationId: newCorrelationId(),
      taskId,
      decide: () => ({ state: { status: "generated" }, emit: steps }),
    });
    const error = await caught(consume(events[2], taskProjection, deps));
    expect(error.code).toBe("ordering.required_version_pending");
    expect(error.message).toContain(`while repairing a gap with plan.created v2`);
    // The gap's first event, which waits for nothing, is applied; the rest waits.
    expect(viewOf(store, taskId)?.version).toBe(1);
    await seedTask(deps, 1, prerequisite);
    expect((await consume(events[2], taskProjection, deps)).status).toBe("applied");
    expect(viewOf(store, taskId)?.version).toBe(3);
  });
});
