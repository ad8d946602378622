import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AwsService } from "../../functions/adapters/aws/client";
import type { CborCodec } from "../../functions/adapters/aws/lean/cbor";
import type { WireResponse } from "../../functions/adapters/aws/lean/wire";
import { FaultInjector } from "../../lib/dev/chaos/injector";
import type { FaultPlan } from "../../lib/dev/chaos/plan";
import { playStackSchedule } from "../../lib/dev/chaos/schedule";
import { FAULT_KINDS } from "../../lib/dev/faults/kinds";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { emulator } from "../support/aws";

/**
 * Chaos on the full local stack runs the functions with the AWS client they ship (the lean
 * client), faults at its HTTP seam; and it catches a classification bug planted in that client:
 * a throttling answer decoded as a ValidationException (a client error, never retried) makes the
 * pipeline give work up as permanently failed, which the schedule's invariants see.
 */

const planted = vi.hoisted(() => ({ on: false }));

vi.mock("../../functions/adapters/aws/lean/wire", async (importOriginal) => {
  const wire = await importOriginal<typeof import("../../functions/adapters/aws/lean/wire")>();
  return {
    ...wire,
    decodeResponse(
      service: AwsService,
      operation: string,
      response: WireResponse,
      cbor?: CborCodec,
    ) {
      try {
        return wire.decodeResponse(service, operation, response, cbor);
      } catch (error) {
        if (planted.on && /Throttl|ProvisionedThroughput/.test((error as Error).name))
          Object.assign(error as Error, { name: "ValidationException" });
        throw error;
      }
    },
  };
});

/** Throttles only, on a fifth of the calls of a message's first deliveries. */
const THROTTLES: Omit<FaultPlan, "seed"> = {
  rates: Object.fromEntries(
    FAULT_KINDS.map((k) => [k, k === "throttle" ? 0.2 : 0]),
  ) as FaultPlan["rates"],
};

describe("chaos with the lean client's faults at its HTTP seam", () => {
  const injector = new FaultInjector();
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `lean${ulid().slice(-6).toLowerCase()}`,
      faultInjection: injector,
    });
  }, 120_000);
  afterAll(() => env?.stop());

  // A settled schedule takes seconds here: a minute without settling is a violation already. (Half
  // a minute was not always enough beside the rest of the suite on two cores: a throttled send's
  // backoffs and the pollers' long polls add up while the CPU is shared.)
  const play = (seed: number) =>
    playStackSchedule(env, injector, seed, { plan: { seed, ...THROTTLES }, settleMs: 60_000 });

  it("the client retries the throttles through: no invariant broken", async () => {
    planted.on = false;
    const result = await play(11);
    const throttles = Object.entries(result.injected)
      .filter(([kind]) => kind.startsWith("throttle"))
      .reduce((sum, [, n]) => sum + n, 0);
    expect(throttles).toBeGreaterThan(10);
    expect(result.violations).toEqual([]);
  }, 120_000);

  it("a planted misclassification of throttling is caught", async () => {
    planted.on = true;
    try {
      const result = await play(12);
      expect(result.violations.length).toBeGreaterThan(0);
      console.info(`planted bug caught: ${result.violations.map((v) => v.invariant).join(", ")}`);
    } finally {
      planted.on = false;
    }
  }, 120_000);
});
