import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { KeyCache } from "../../functions/core/personal-data/key-cache";

/** The bounds of the plain keys a function keeps: age, messages, entries. */
describe("the key cache", () => {
  it("gives a key for at most maxMessages uses and for less than maxAgeMs, whatever the order", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 1000 }),
        fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 60 }),
        (maxMessages, maxAgeMs, steps) => {
          let now = 0;
          const cache = new KeyCache<string>(() => now, { maxAgeMs, maxMessages, maxEntries: 10 });
          cache.keep("k", "key");
          let uses = 1;
          for (const step of steps) {
            now += step;
            const got = cache.use("k");
            if (got === undefined) {
              // Stale: past one of the bounds, never before.
              expect(now >= maxAgeMs || uses >= maxMessages).toBe(true);
              return;
            }
            uses++;
            expect(uses).toBeLessThanOrEqual(maxMessages);
            expect(now).toBeLessThan(maxAgeMs);
          }
        },
      ),
    );
  });

  it("is read again after maxAgeMs, and after maxMessages uses", () => {
    let now = 0;
    const aged = new KeyCache<string>(() => now, { maxAgeMs: 100, maxMessages: 1000 });
    aged.keep("k", "key");
    now = 99;
    expect(aged.use("k")).toBe("key");
    now = 100;
    expect(aged.use("k")).toBeUndefined();
    const used = new KeyCache<string>(() => 0, { maxAgeMs: 100, maxMessages: 3 });
    used.keep("k", "key");
    expect([used.use("k"), used.use("k"), used.use("k")]).toEqual(["key", "key", undefined]);
  });

  it("keeps at most maxEntries, the oldest read going first", () => {
    const cache = new KeyCache<number>(() => 0, { maxEntries: 2 });
    cache.keep("a", 1);
    cache.keep("b", 2);
    cache.keep("c", 3);
    expect(cache.size).toBe(2);
    expect([cache.use("a"), cache.use("b"), cache.use("c")]).toEqual([undefined, 2, 3]);
  });

  it("refuses a bound that is not a whole number from 1", () => {
    expect(() => new KeyCache(() => 0, { maxMessages: 0 })).toThrow(/maxMessages/);
    expect(() => new KeyCache(() => 0, { maxAgeMs: 1.5 })).toThrow(/maxAgeMs/);
  });
});
