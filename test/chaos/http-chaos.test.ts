import { Readable } from "node:stream";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FaultInjector } from "../../lib/dev/chaos/injector";
import type { FaultPlan } from "../../lib/dev/chaos/plan";
import { playStackSchedule } from "../../lib/dev/chaos/schedule";
import { FAULT_KINDS } from "../../lib/dev/faults/kinds";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import type { HttpSender } from "../../lib/dev/local/runtime/faults";
import { emulator } from "../support/aws";

/**
 * Chaos on the full local stack runs the functions on SDK clients of their own, faults at their
 * HTTP seam, below the SDK's retries; and it catches a misreading planted at that seam: a
 * throttling answer turned into a ValidationException (a client error, never retried) makes the
 * pipeline give work up as permanently failed, which the schedule's invariants see.
 */

const planted = { on: false };

/** The fault injector, with throttling answers renamed ValidationException while `planted.on`. */
class MisreadingInjector extends FaultInjector {
  override http(sender: HttpSender): HttpSender {
    const faulty = super.http(sender);
    return {
      async handle(request, options) {
        const result = await faulty.handle(request, options);
        const { response } = result;
        if (!planted.on || response.statusCode !== 400 || !response.body) return result;
        const chunks: Buffer[] = [];
        for await (const chunk of response.body) chunks.push(Buffer.from(chunk));
        const text = Buffer.concat(chunks).toString("utf8");
        const misread = /Throttl|ProvisionedThroughput/.test(text);
        const { "x-amzn-query-error": queryError, ...headers } = response.headers;
        return {
          response: {
            ...response,
            headers: misread ? headers : { ...headers, "x-amzn-query-error": queryError },
            body: Readable.from([
              Buffer.from(misread ? JSON.stringify({ __type: "ValidationException" }) : text),
            ]),
          },
        };
      },
    };
  }
}

/** Throttles only, on a fifth of the calls of a message's first deliveries. */
const THROTTLES: Omit<FaultPlan, "seed"> = {
  rates: Object.fromEntries(
    FAULT_KINDS.map((k) => [k, k === "throttle" ? 0.2 : 0]),
  ) as FaultPlan["rates"],
};

describe("chaos with faults at the HTTP seam of the functions' SDK clients", () => {
  const injector = new MisreadingInjector();
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `http${ulid().slice(-6).toLowerCase()}`,
      faultInjection: injector,
    });
  }, 120_000);
  afterAll(() => env?.stop());

  // A settled schedule takes seconds here: a minute without settling is a violation already. (Half
  // a minute was not always enough beside the rest of the suite on two cores: a throttled send's
  // backoffs and the pollers' long polls add up while the CPU is shared.)
  const play = (seed: number) =>
    playStackSchedule(env, injector, seed, { plan: { seed, ...THROTTLES }, settleMs: 60_000 });

  it("the SDK retries the throttles through: no invariant broken", async () => {
    planted.on = false;
    const result = await play(11);
    const throttles = Object.entries(result.injected)
      .filter(([kind]) => kind.startsWith("throttle"))
      .reduce((sum, [, n]) => sum + n, 0);
    expect(throttles).toBeGreaterThan(10);
    expect(result.violations).toEqual([]);
  }, 120_000);

  it("a planted misreading of throttling is caught", async () => {
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
