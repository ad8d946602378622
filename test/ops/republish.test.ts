import { describe, expect, it } from "vitest";
import { hoursBetween, windowOfFailure } from "../../lib/operator/republish";

describe("republish windows", () => {
  it("walks every UTC hour of a window, both ends included", () => {
    expect(
      hoursBetween(new Date("2026-11-30T22:59:00Z"), new Date("2026-12-01T01:00:00Z")),
    ).toEqual(["2026-11-30T22", "2026-11-30T23", "2026-12-01T00", "2026-12-01T01"]);
    expect(
      hoursBetween(new Date("2026-11-30T10:10:00+02:00"), new Date("2026-11-30T08:20:00Z")),
    ).toEqual(["2026-11-30T08"]);
  });

  it("reads a relay failure record's window (padded one minute), nothing from other bodies", () => {
    const body = {
      DDBStreamBatchInfo: {
        approximateArrivalOfFirstRecord: "2026-11-30T10:00:00.000Z",
        approximateArrivalOfLastRecord: "2026-11-30T10:05:00.000Z",
      },
    };
    expect(windowOfFailure({ Body: JSON.stringify(body) })).toEqual({
      from: new Date("2026-11-30T09:59:00.000Z"),
      to: new Date("2026-11-30T10:06:00.000Z"),
    });
    expect(windowOfFailure({ Body: "{}" })).toBeUndefined();
    expect(windowOfFailure({ Body: "not json" })).toBeUndefined();
  });
});
