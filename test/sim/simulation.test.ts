import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_UNKNOWN_ATTEMPTS } from "../../functions/core/write-once";
import { senderModule } from "../../functions/roles/customer-support/sender";
import { SENDER_GROUP } from "../../functions/roles/customer-support/sender/sender";
import { Random } from "../../lib/dev/faults/random";
import { simulatedPlan } from "../../lib/dev/sim/plan";
import type { PlantedBug } from "../../lib/dev/sim/planted";
import { GroupQueue } from "../../lib/dev/sim/queues";
import { playSchedule } from "../../lib/dev/sim/schedule";
import { World } from "../../lib/dev/sim/world";
import { groupDefaults } from "../../lib/infra/constructs/consumer-group-rules";

/**
 * The deterministic simulation (lib/dev/sim): 100 seeded schedules of the whole workflow topology
 * under faults must keep every invariant; planted defects must break one; a seed must replay the
 * same schedule. `npm run chaos` plays thousands more.
 */
describe("simulated schedules", () => {
  it("keep every invariant over 100 seeds, with every fault injected somewhere", async () => {
    const injected: Record<string, number> = {};
    for (let seed = 1; seed <= 100; seed++) {
      const result = await playSchedule(seed);
      expect(result.violations, `seed ${seed}`).toEqual([]);
      for (const [kind, n] of Object.entries({ ...result.counts, ...result.injected }))
        injected[kind] = (injected[kind] ?? 0) + n;
    }
    for (const kind of [
      "throttle load",
      "throttle commit",
      "timeout-after-apply commit",
      "crash-after-write relay",
      "crash-after-write consumer",
      "stall consumer",
      "gap-repaired",
      "redriven",
      "timeout-after-apply channel",
      "timeout-after-apply payment",
      // MCP write tools: a timeout after the server applied, a worker's crash after it applied.
      "timeout-after-apply mcp",
      "crash-after-write mcp",
      // A2A write tools: a timeout after the remote agent acted, a worker's crash after it acted.
      "timeout-after-apply a2a",
      "crash-after-write a2a",
      // An MCP task that outlived its call: a crash after the server created it, or while polled.
      "crash-after-task-created mcp",
      "crash-while-polling mcp",
      // Customers erased while their conversations went on, and events read back [erased].
      "erasure erased",
      "relayed erased",
      // Headline scoring runs whose map node completed and failed, whose loop ended both ways,
      // and a judge that failed.
      "map node COMPLETED",
      "map node FAILED",
      "loop ended condition",
      "loop ended max_rounds",
      // Child runs that completed, and that were cancelled with their parent.
      "child run COMPLETED",
      "child run CANCELLED",
      "map item answers failed",
      "timeout-after-apply judge",
      // Waits released by their signal, by their timer and failed at their deadline; signals
      // that released a wait, that found none (early, twice), and that came after it timed out.
      "wait COMPLETED signal",
      "wait COMPLETED timer",
      "wait FAILED dag.wait_deadline",
      "signal released",
      "signal unmatched",
      "signal unmatched after its wait timed out",
    ])
      expect(injected[kind], kind).toBeGreaterThan(0);
  }, 300_000);

  it.each<[PlantedBug, string]>([
    ["forgetful-inbox", "applied once"],
    ["wrong-stream-repair", "nothing lost"],
    ["skipped-version-condition", "applied once"],
    ["new-key-per-retry", "sent once"],
    ["refund-new-key-per-retry", "refunded once"],
    ["mcp-key-per-attempt", "MCP write applied once"],
    ["a2a-message-id-per-attempt", "A2A message applied once"],
    ["refund-record-unread", "refunded once"],
    ["refund-any-order", "refunds only the reviewed order"],
    ["step-record-forgotten", "step run once"],
    ["loop-round-not-advanced", "loop within its rounds"],
    ["child-id-not-idempotent", "child started once"],
    ["late-signal-accepted", "signal released what waited"],
    ["client-seq-ignored", "client messages applied in sequence order"],
  ])(
    "catch a planted %s (%s)",
    async (bug, invariant) => {
      const broken: string[] = [];
      // Up to 100 seeds, until the invariant breaks.
      for (let seed = 1; seed <= 100 && !broken.includes(invariant); seed++) {
        // The channel, the payment stand-in, the MCP server and the A2A agent fail often enough
        // for a retry in most schedules.
        const drawn = simulatedPlan(seed, new Random(seed));
        const rates = { ...drawn.rates, channel: 0.2, payment: 0.2, mcp: 0.2, a2a: 0.2 };
        const plan = { seed, rates };
        const result = await playSchedule(seed, { bug, plan });
        broken.push(...result.violations.map((v) => v.invariant));
      }
      expect(broken).toContain(invariant);
    },
    120_000,
  );

  it("play the same schedule again from its seed", async () => {
    const first = await playSchedule(4242);
    const again = await playSchedule(4242);
    expect(again.counts).toEqual(first.counts);
    expect(again.injected).toEqual(first.injected);
    expect(again.plan).toEqual(first.plan);
    expect(first.counts.deliveries).toBeGreaterThan(0);
  });
});

describe("the simulated group queue", () => {
  const message = (id: number, messageGroup: string) => ({
    id,
    group: "g",
    messageGroup,
    body: "{}",
    receiveCount: 0,
    invisibleUntil: 0,
  });

  it("hands out one message per message group at a time, in order, and dead-letters after the receive limit", () => {
    const queue = new GroupQueue("g", 2);
    const [a1, a2, b1] = [message(1, "a"), message(2, "a"), message(3, "b")];
    for (const m of [a1, a2, b1]) queue.send(m);
    expect(queue.receivable(0)).toEqual([a1, b1]);
    queue.receive(a1, 0, 3);
    expect(queue.receivable(1)).toEqual([b1]);
    queue.fail(a1);
    expect(queue.receivable(3)).toEqual([a1, b1]);
    queue.receive(a1, 3, 3);
    queue.fail(a1);
    expect(queue.deadLetters).toEqual([a1]);
    expect(queue.receivable(6)).toEqual([a2, b1]);
    expect(queue.redrive()).toBe(1);
    expect(queue.messages.at(-1)).toMatchObject({ id: 1, receiveCount: 0 });
  });

  it("draws the same numbers from the same seed", () => {
    const a = new Random(7);
    const b = new Random(7);
    expect(Array.from({ length: 5 }, () => a.next())).toEqual(
      Array.from({ length: 5 }, () => b.next()),
    );
  });
});

describe("a reply channel that keeps failing", () => {
  it("gives each group's queue the receives its module declares, the sender's outlasting its unknown-outcome bound", () => {
    const world = new World({ seed: 6448, plan: simulatedPlan(6448) });
    expect(world.queues.get(SENDER_GROUP)?.maxReceiveCount).toBe(
      senderModule.deployment.maxReceiveCount,
    );
    expect(senderModule.deployment.maxReceiveCount).toBeGreaterThan(DEFAULT_MAX_UNKNOWN_ATTEMPTS);
    expect(world.queues.get("audit")?.maxReceiveCount).toBe(groupDefaults().maxReceiveCount);
  });

  // Seeds that once broke "conversations answered" at the heaviest channel faults. 6448: the
  // channel refused the send on five receives; the sender's queue dead-lettered it after five (not
  // its eight), and the redriven send had expired. 1634: the send timed out twice on the fifth
  // attempt, and the sender escalated it, a hand-off the invariant did not count as one (the
  // invariant's own test, test/faults/invariants.test.ts, holds that case by hand: a schedule's
  // draws move whenever the workflows it plays change).
  it.each([1634, 6211, 6448])("answers every conversation in seed %i", async (seed) => {
    const result = await playSchedule(seed);
    expect(result.plan.rates.channel).toBe(0.15);
    expect(result.violations).toEqual([]);
  });
});
