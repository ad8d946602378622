import { ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { runScenario, type ScenarioResult } from "../../lib/dev/local/scenario";
import { defineTopology } from "../../lib/infra/topology";
import { emulator } from "../support/aws";

/**
 * The same scenario with the task projection delivered by a FIFO subscriber of the events topic's
 * new EventBridge bus (`delivery: "subscriber"`): the relay publishes to the bus with the order
 * key as the event group, the subscriber sends to the FIFO queue with it as the message group.
 * No emulator has the new buses: the local runtime emulates the bus and its subscriber from the
 * synthesized template.
 */
describe("subscriber delivery, end to end", () => {
  let env: LocalEnvironment;
  let result: ScenarioResult;

  beforeAll(async () => {
    const topology = defineTopology({
      topics: ["commands", "events", "audit"],
      groups: [
        {
          name: "task-projection",
          role: taskProjection,
          handler: "functions/roles/task-projection/handler.ts",
          delivery: "subscriber",
        },
      ],
    });
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `sub${ulid().slice(-6).toLowerCase()}`,
      topology,
    });
    result = await runScenario(env);
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("runs a subscriber, and no pipe, buffer queue or dispatch function", () => {
    expect(env.deployment.subscribers).toHaveLength(1);
    expect(env.deployment.subscribers[0]).toMatchObject({
      fifo: true,
      messageGroupId: "{% $events.Data.detail.order_key %}",
      messageDeduplicationId: "{% $events.Data.detail.event_id %}",
    });
    expect(env.deployment.subscriberBuses.map((b) => b.name)).toEqual([
      expect.stringMatching(/-events$/),
    ]);
    expect(env.deployment.pipes).toEqual([]);
    expect(env.deployment.functions.map((f) => f.kind).sort()).toEqual([
      "consumer",
      "front-door",
      "front-door-stream",
      "relay",
    ]);
    const queues = [...env.deployment.resources.values()].filter(
      (r) => r.type === "AWS::SQS::Queue",
    );
    expect(queues.some((q) => q.ref.endsWith("-task-projection-buffer"))).toBe(false);
  });

  it("passes every scenario check", () => {
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.views.A?.history.map((h) => h.version)).toEqual([1, 2, 3, 4]);
  });

  it("kept what reached the bus: the relay's events grouped by order key, and the client's forwarded", () => {
    const bus = env.deployment.subscriberBuses[0];
    const kept = bus ? (env.runtime.subscriberBuses?.retainedSince(bus.arn, 0) ?? []) : [];
    const published = kept.filter((e) => e.SystemMetadata.EventGroupId !== undefined);
    const forwarded = kept.filter((e) => e.SystemMetadata["aws:Source"] !== undefined);
    expect(published.length).toBeGreaterThan(0);
    for (const event of published)
      expect(event.SystemMetadata.EventGroupId).toBe(
        (event.Data.detail as { order_key: string }).order_key,
      );
    // Put on the classic bus by a client, they reach the new bus through the bridge rule.
    expect(forwarded.map((e) => e.SystemMetadata["aws:Source"])).toContain("agentbus.client");
    expect(published.length + forwarded.length).toBe(kept.length);
  });

  it("dead-lettered nothing", async () => {
    const url = env.deployment.outputs.TaskProjectionBufferDeadLetterQueueUrl;
    expect(url).toBeDefined();
    const { Messages } = await env.clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }),
    );
    expect(Messages ?? []).toEqual([]);
  });
});
