import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FaultInjector } from "../../lib/dev/chaos/injector";
import { playStackSchedule, type StackScheduleResult } from "../../lib/dev/chaos/schedule";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { topology } from "../../lib/infra/project";
import { defineTopology } from "../../lib/infra/topology";
import { emulator } from "../support/aws";

/**
 * The full-stack chaos schedules of chaos-stack.test.ts (seeds 4 and 12: 5xx errors, connection
 * resets, crashes and lost acks; DynamoDB faults and crashes after writes) with every FIFO group
 * that can be delivered by a subscriber of its topic's new bus (`delivery: "subscriber"`: not one
 * with `tenantConcurrency` or a `deliveryBatchingWindow`, which need a dispatch function, nor one
 * that reads the events table's stream) delivered that way. Every invariant must hold as it does
 * for the dispatch function.
 */
const SEEDS = [4, 12];

function subscriberTopology() {
  return defineTopology({
    topics: topology.topics,
    groups: topology.groups.map((g) =>
      g.ordering === "fifo" &&
      g.delivery !== "stream" &&
      g.tenantConcurrency === undefined &&
      g.deliveryBatchingWindow === undefined
        ? { ...g, delivery: "subscriber" as const }
        : g,
    ),
  });
}

describe("full-stack chaos schedules, groups delivered by subscribers", () => {
  let env: LocalEnvironment;
  const injector = new FaultInjector();
  const results: StackScheduleResult[] = [];

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `chsub${ulid().slice(-6).toLowerCase()}`,
      topology: subscriberTopology(),
      faultInjection: injector,
    });
    for (const seed of SEEDS) results.push(await playStackSchedule(env, injector, seed));
  }, 600_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("delivers the FIFO groups by subscribers, not by dispatch functions", () => {
    expect(env.deployment.subscribers.length).toBeGreaterThan(3);
    const dispatchers = env.deployment.functions.filter((f) => f.kind === "dispatch");
    expect(dispatchers.length).toBeLessThan(env.deployment.subscribers.length);
  });

  it("breaks no invariant: applied once, nothing lost, sent once, runs and replies end, views fold, only the poison dead-lettered", () => {
    const broken = results.flatMap((r) =>
      r.violations.map((v) => `seed ${r.seed}: ${v.invariant}: ${v.detail}`),
    );
    expect(broken).toEqual([]);
    for (const r of results) expect(r.outcome.reply, `seed ${r.seed}`).toBe("delivered");
  });
});
