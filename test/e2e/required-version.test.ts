import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendToStream } from "../../functions/core/producer";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import type { TaskView } from "../../functions/roles/task-projection/task-projection";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { defineTopology } from "../../lib/infra/topology";
import { type Envelope, registry } from "../../schemas";
import { emulator } from "../support/aws";

/**
 * A message that waits for another aggregate's version, on the local stack: it reaches its FIFO
 * queue before the state does, is held (the batch item fails and its visibility is set to the
 * retry backoff), comes back from the queue, and is applied once the state has reached the version.
 */
describe("required_version on the local stack", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    const topology = defineTopology({
      topics: ["commands", "events", "audit"],
      groups: [
        {
          name: taskProjection.group,
          role: taskProjection,
          handler: "functions/roles/task-projection/handler.ts",
        },
      ],
    });
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `rv${ulid().slice(-6).toLowerCase()}`,
      topology,
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("holds the message until the state it names reaches the version, then applies it once", async () => {
    const prerequisite = `task_${ulid()}`;
    const onTask = `task_${ulid()}`;
    const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
    const message = {
      event_id: ulid(),
      event_type: "task.feedback.received",
      schema_version: 1,
      occurred_at: new Date().toISOString(),
      correlation_id: `corr_${ulid()}`,
      causation_id: null,
      task_id: onTask,
      aggregate: { type: "task", id: onTask, version: 0 },
      order_key: onTask,
      producer: "web-client",
      attempt: 1,
      required_version: { type: "task", id: prerequisite, version: 1 },
      payload: { rating: 5 },
    } as Envelope;
    await putOnBus(env, "events", [message]);

    const held = await waitUntil("the message held", () =>
      env.observations.errors.find((e) => e.code === "ordering.required_version_pending"),
    );
    expect(held.message).toContain(`task/${prerequisite} to reach version 1, at version 0`);
    const viewOf = async () =>
      (await env.store.load({ state: { type: "task_view", id: onTask } })).state?.data as
        | TaskView
        | undefined;
    expect(await viewOf()).toBeUndefined();

    await appendToStream(deps, {
      aggregate: { type: "task", id: prerequisite },
      producer: "task-api",
      correlationId: `corr_${ulid()}`,
      taskId: prerequisite,
      decide: () => ({ emit: [{ type: "task.accepted", payload: { title: "refund" } }] }),
    });
    const view = await waitUntil("the message applied", async () => (await viewOf())?.feedback);
    expect(view).toEqual({ count: 1, rating_total: 5 });
    await env.runtime.idle();
    const outcomes = env.observations.deliveries.get(message.event_id) ?? [];
    expect(outcomes.filter((o) => o.status === "applied")).toHaveLength(1);
    expect(env.observations.deadLetters).toEqual([]);
  }, 120_000);
});
