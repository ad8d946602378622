import fc from "fast-check";
import { decodeTime } from "ulid";
import { describe, expect, it } from "vitest";
import {
  carriesCorrelationDigest,
  correlationDigest,
  digestOfEventId,
  eventIdSource,
} from "../../functions/core/event-ids";
import { ManualClock } from "../../functions/core/runtime";
import { ULID_PATTERN } from "../../schemas/ids";

/**
 * The hub's event ids (functions/core/event-ids.ts): valid ULIDs, strictly increasing within a
 * source whatever the clock does, unique, and each stored event's id carrying its correlation's
 * digest in its last 8 characters.
 */

/** One call of a source: the clock moves by `step` ms (0: same millisecond, < 0: steps back). */
const call = fc.record({
  step: fc.integer({ min: -3, max: 3 }),
  correlation: fc.option(fc.constantFrom("corr_a", "corr_b", "conv-1", "c"), { nil: undefined }),
});

describe("event ids", () => {
  it("are valid ULIDs, strictly increasing and unique, and carry the digest they were minted for", () => {
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 200 }), (calls) => {
        const clock = new ManualClock("2026-12-06T05:00:00.000Z");
        const ids = eventIdSource(clock);
        const minted: string[] = [];
        for (const { step, correlation } of calls) {
          clock.advance(step);
          const id = ids.next(correlation);
          expect(id).toMatch(ULID_PATTERN);
          // The time part never goes back, even when the clock does.
          expect(decodeTime(id)).toBeLessThanOrEqual(
            Math.max(clock.now().getTime(), decodeTime(minted.at(-1) ?? id)),
          );
          if (correlation !== undefined) {
            expect(carriesCorrelationDigest(id, correlation)).toBe(true);
            expect(digestOfEventId(id)).toBe(correlationDigest(correlation));
          }
          minted.push(id);
        }
        for (const [i, id] of minted.entries())
          if (i > 0) expect(id > (minted[i - 1] as string), `${i}`).toBe(true);
        expect(new Set(minted).size).toBe(minted.length);
      }),
    );
  });

  it("are unique across sources minting for one correlation in one millisecond", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 50 }), fc.string(), (sources, correlation) => {
        const clock = new ManualClock("2026-12-06T05:00:00.000Z");
        const minted = Array.from({ length: sources }, () =>
          eventIdSource(clock).next(correlation),
        );
        expect(new Set(minted).size).toBe(sources);
        for (const id of minted) expect(carriesCorrelationDigest(id, correlation)).toBe(true);
      }),
    );
  });

  it("a digest is 8 Crockford characters, and an id minted for one correlation does not claim another", () => {
    const ids = eventIdSource(new ManualClock());
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        expect(correlationDigest(a)).toMatch(/^[0-9A-HJKMNP-TV-Z]{8}$/);
        fc.pre(correlationDigest(a) !== correlationDigest(b));
        expect(carriesCorrelationDigest(ids.next(a), b)).toBe(false);
      }),
    );
    // An id minted without a correlation, or not a ULID at all, carries none.
    expect(carriesCorrelationDigest(ids.next(), "corr_a")).toBe(false);
    expect(carriesCorrelationDigest(correlationDigest("corr_a"), "corr_a")).toBe(false);
  });
});
