import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FaultInjector } from "../../lib/dev/chaos/injector";
import { TRACE_SHOWS_OUTCOME } from "../../lib/dev/chaos/invariants";
import { playStackSchedule, type StackScheduleResult } from "../../lib/dev/chaos/schedule";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { emulator } from "../support/aws";

/**
 * Full-stack chaos schedules (`npm run chaos -- --stack`) with fixed seeds, on one deployment:
 * each plays a reference task, a content run, a support conversation and a poison message under
 * its seed's fault plan (SDK faults on the functions' calls, crashed invocations, lost acks,
 * stalled model calls) and must break none of the invariants.
 * Seed 12 is heavy on DynamoDB faults (throttles, 5xx and timeouts after apply at 4% each) and
 * crashes after writes; 2 stalls model calls past their visibility timeout and loses acks; 4 has
 * 5xx errors, connection resets, crashes and lost acks; 27 loses acks at 10%, which once lost one
 * message's acknowledgement five times running (the plan now loses a message's ack at most
 * twice). Played after 4 on one deployment, seed 12 found idle() reporting a stream shard read
 * up too early.
 */
const SEEDS = [2, 4, 12, 27];

describe("full-stack chaos schedules", () => {
  let env: LocalEnvironment;
  const injector = new FaultInjector();
  const results: StackScheduleResult[] = [];

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `chaos${ulid().slice(-6).toLowerCase()}`,
      faultInjection: injector,
    });
    for (const seed of SEEDS) results.push(await playStackSchedule(env, injector, seed));
  }, 600_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("injects faults of every kind its plans turn on", () => {
    const injected = (kind: string) =>
      results.reduce(
        (n, r) =>
          n +
          Object.entries(r.injected)
            .filter(([key]) => key.startsWith(`${kind} `))
            .reduce((a, [, m]) => a + m, 0),
        0,
      );
    for (const kind of ["throttle", "server-error", "timeout-after-apply", "crash-after-write"])
      expect(injected(kind), kind).toBeGreaterThan(0);
  });

  it("breaks no invariant: applied once, nothing lost, sent once, runs and replies end, views fold, only the poison dead-lettered", () => {
    const broken = results.flatMap((r) =>
      r.violations
        .filter((v) => v.invariant !== TRACE_SHOWS_OUTCOME)
        .map((v) => `seed ${r.seed}: ${v.invariant}: ${v.detail}`),
    );
    expect(broken).toEqual([]);
    for (const r of results) expect(r.outcome.reply, `seed ${r.seed}`).toBe("delivered");
  });

  // Seed 1 found it: a failure record of a retry before the apply hid the outcome the group's
  // checkpoint recorded, and the trace showed `retrying` for an applied event.
  it("the operator's trace shows every group's outcome, retries or not", () => {
    const hidden = results.flatMap((r) =>
      r.violations.filter((v) => v.invariant === TRACE_SHOWS_OUTCOME),
    );
    expect(hidden).toEqual([]);
  });
});
