import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isoTime } from "../../functions/core/iso-time";

describe("isoTime", () => {
  it("writes what toISOString writes, for any time and any order of calls", () => {
    // Times near each other (same second, next millisecond) as well as far apart and out of range.
    const base = fc.integer({ min: -62_198_755_200_000, max: 253_402_300_799_999 });
    const times = fc.array(
      fc.tuple(base, fc.array(fc.integer({ min: -1_500, max: 1_500 }), { maxLength: 6 })),
      { maxLength: 20 },
    );
    fc.assert(
      fc.property(times, (groups) => {
        for (const [start, steps] of groups) {
          let ms = start;
          for (const step of [0, ...steps]) {
            ms += step;
            const date = new Date(ms);
            expect(isoTime(date)).toBe(date.toISOString());
          }
        }
      }),
    );
  });

  it("pads the milliseconds within a second it has seen", () => {
    const second = Date.parse("2026-12-01T10:00:00.000Z");
    for (const ms of [0, 7, 42, 999, 5, 100])
      expect(isoTime(new Date(second + ms))).toBe(new Date(second + ms).toISOString());
  });

  it("writes years beyond 9999 and before 0 as toISOString does, and throws on an invalid date", () => {
    for (const iso of ["+010000-01-01T00:00:00.000Z", "-000001-06-01T12:00:00.500Z"]) {
      const date = new Date(iso);
      expect(isoTime(date)).toBe(iso);
      expect(isoTime(new Date(date.getTime() + 1))).toBe(
        new Date(date.getTime() + 1).toISOString(),
      );
    }
    expect(() => isoTime(new Date(Number.NaN))).toThrow(RangeError);
  });
});
