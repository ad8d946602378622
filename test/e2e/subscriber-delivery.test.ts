import { ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { taskProjectionDelivered } from "../../lib/dev/local/delivered-topology";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { matches } from "../../lib/dev/local/runtime/filters";
import type { BusEvent } from "../../lib/dev/local/runtime/subscriber-buses";
import { runScenario, type ScenarioResult } from "../../lib/dev/local/scenario";
import { replayName } from "../../lib/infra/replay-names";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";

/**
 * The same scenario with the task projection delivered by a FIFO subscriber of the events topic's
 * new EventBridge bus (`delivery: "subscriber"`): the relay publishes to the bus with the order
 * key as the event group, the subscriber sends to the FIFO queue with it as the message group.
 * No emulator has the new buses: the local runtime emulates the bus and its subscriber from the
 * synthesized template.
 */
describe("subscriber delivery, end to end", () => {
  const stage = `sub${ulid().slice(-6).toLowerCase()}`;
  const cli = localCli(() => env, stage, { AGENTBUS_OPERATOR: "ops-oncall" });
  let env: LocalEnvironment;
  let result: ScenarioResult;
  let from = new Date();
  let to = new Date();

  beforeAll(async () => {
    const topology = taskProjectionDelivered("subscriber");
    env = await startLocal({ endpoint: emulator().endpoint, stage, topology });
    from = new Date(Date.now() - 1000);
    result = await runScenario(env);
    await env.runtime.idle();
    to = new Date();
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
    const sources = forwarded.map((e) => e.SystemMetadata["aws:Source"]);
    expect(sources).toContain("agentbus.client");
    expect(published.length + forwarded.length).toBe(kept.length);
    // What the relay published reaches the new bus once: the bridge rule leaves the relay's events
    // out, and forwards a stored event again only when a client puts it again (the scenario's
    // replayed duplicate).
    expect(sources).not.toContain("agentbus.relay");
    const idOf = (e: (typeof kept)[number]) => (e.Data.detail as { event_id: string }).event_id;
    const publishedIds = new Set(published.map(idOf));
    const again = forwarded.filter((e) => publishedIds.has(idOf(e)));
    expect(new Set(again.map((e) => e.SystemMetadata["aws:Source"]))).toEqual(
      new Set(["agentbus.replay"]),
    );
  });

  it("agentbus replay creates a point-in-time subscriber through eventbridgev2: every event again, each a duplicate, the view as it was", async () => {
    const buses = env.runtime.subscriberBuses;
    const live = env.deployment.subscribers[0];
    if (!buses || !live) throw new Error("no subscriber bus");
    const viewOf = async () =>
      (await env.store.load({ state: { type: "task_view", id: result.views.A?.task_id ?? "" } }))
        .state?.data;
    const before = await viewOf();
    const name = replayName({ stage, topic: "events", from, to, groups: ["task-projection"] });
    const window = ["--from", from.toISOString(), "--to", to.toISOString()];
    const replay = (...more: string[]) =>
      cli("replay", ...window, "--group", "task-projection", ...more);
    const created = () =>
      (env.subscriberBusEndpoint?.calls ?? []).filter((c) => c.operation === "CreateSubscriber");
    const dry = await replay("--dry-run");
    expect(dry).toMatchObject({ code: 0, stderr: "" });
    expect(dry.stdout).toContain(`events: point-in-time subscriber ${name}`);
    expect(dry.stdout).toContain("dry run: nothing started");
    // Older than the new bus keeps (14 days): refused before anything is created, as for an archive.
    const old = new Date(Date.now() - 30 * 86_400_000).toISOString();
    const refused = await cli(
      "replay",
      "--from",
      old,
      "--to",
      to.toISOString(),
      "--group",
      "task-projection",
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/outside the retention of new bus \S+-events \(14 days/);
    expect(created()).toEqual([]);
    const seen = new Map([...env.observations.deliveries].map(([id, ds]) => [id, ds.length]));
    const run = await replay("--reason", "task view check");
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toContain(`started ${name} (RUNNING)`);
    expect(run.stdout).toContain("recorded in the audit trail");
    expect(created()).toHaveLength(1);
    await env.runtime.idle();
    const replayed = [...env.observations.deliveries].flatMap(([id, ds]) =>
      ds.slice(seen.get(id) ?? 0).map((d) => ({ ...d, id })),
    );
    // Every event the bus kept of the group's types, the client's unsequenced feedback included:
    // the replay's own deduplication id gets them past the FIFO queue's five-minute window.
    const kept = buses
      .retainedSince(live.busArn, from.getTime())
      .filter((e) => live.patterns.every((p) => matches(e.Data, p)));
    const ids = new Set(kept.map((e) => (e.Data.detail as { event_id: string }).event_id));
    expect(new Set(replayed.map((d) => d.id))).toEqual(
      new Set([...ids].filter((id) => id !== poisonId(kept))),
    );
    expect(new Set(replayed.map((d) => d.status))).toEqual(new Set(["duplicate"]));
    expect(await viewOf()).toEqual(before);
    // The same command again finds the subscriber it created: nothing created, nothing delivered.
    const again = new Map([...env.observations.deliveries].map(([id, ds]) => [id, ds.length]));
    const repeated = await replay();
    expect(repeated).toMatchObject({ code: 0, stderr: "" });
    expect(repeated.stdout).toContain(`already started: ${name} (RUNNING); nothing new started`);
    expect(created()).toHaveLength(1);
    await env.runtime.idle();
    expect(new Map([...env.observations.deliveries].map(([id, ds]) => [id, ds.length]))).toEqual(
      again,
    );
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

/** The scenario's poison message (an invalid envelope): never delivered as an event, so not replayed as one. */
function poisonId(kept: readonly BusEvent[]): string | undefined {
  return kept
    .map((e) => e.Data.detail as { event_id: string; correlation_id?: string })
    .find((d) => d.correlation_id?.startsWith("user_"))?.event_id;
}
