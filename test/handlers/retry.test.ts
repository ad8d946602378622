import { describe, expect, it } from "vitest";
import { TransientError } from "../../functions/core/errors";
import {
  MAX_VISIBILITY_SECONDS,
  retryDelayFor,
  retryDelaySeconds,
} from "../../functions/handlers/retry";

/** How long a failed record waits before it comes back (functions/handlers/retry.ts). */
describe("the retry backoff", () => {
  it("doubles with each receive, up to the maximum", () => {
    expect([1, 2, 3, 4, 5].map((n) => retryDelaySeconds(n, 2, 20))).toEqual([2, 4, 8, 16, 20]);
  });

  it("waits as long as a throttled call's Retry-After says, when that is longer", () => {
    const throttled = (seconds: unknown) =>
      new TransientError("payment.throttled", "429", { details: { retryAfterSeconds: seconds } });
    expect(retryDelayFor(throttled(30), 1, 2, 20)).toBe(30);
    expect(retryDelayFor(throttled(2.2), 1, 1, 20)).toBe(3);
    // A shorter Retry-After does not shorten the backoff; a nonsense one is ignored.
    expect(retryDelayFor(throttled(1), 3, 2, 20)).toBe(8);
    expect(retryDelayFor(throttled("soon"), 1, 2, 20)).toBe(2);
    expect(retryDelayFor(throttled(10 ** 9), 1, 2, 20)).toBe(MAX_VISIBILITY_SECONDS);
    expect(retryDelayFor(new Error("plain"), 2, 2, 20)).toBe(4);
  });
});
