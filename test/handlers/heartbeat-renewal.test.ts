import { describe, expect, it } from "vitest";
import { receivedAt, renewalDue, renewalTimes } from "../../functions/handlers/heartbeat";
import { sqsRecord } from "../support/lambda-events";

describe("heartbeat renewals", () => {
  it("a renewal is due once half of its term has passed since the last; without a term, always", () => {
    expect(renewalDue(149_999, 0, 300)).toBe(false);
    expect(renewalDue(150_000, 0, 300)).toBe(true);
    expect(renewalDue(10_000, 9_000, 300)).toBe(false);
    expect(renewalDue(10_000, 9_999, undefined)).toBe(true);
    // Never renewed (an acknowledgement that did not go out): due at once.
    expect(renewalDue(0, Number.NEGATIVE_INFINITY, 300)).toBe(true);
  });

  it("times the renewals of a piece of work as the timer makes them: every tick without a term, at half the term with one", () => {
    // The stack's content agents: a tick every 20 s, a 300 s lease.
    expect(renewalTimes(10, 20, undefined)).toEqual([]);
    expect(renewalTimes(60, 20, undefined)).toEqual([20, 40]);
    expect(renewalTimes(60, 20, 300)).toEqual([]);
    expect(renewalTimes(161, 20, 300)).toEqual([160]);
    // Ticks at 20, 40, ... 580 s: renewed at the first tick 150 s or more past the one before.
    expect(renewalTimes(600, 20, 300)).toEqual([160, 320, 480]);
    expect(renewalTimes(600, 20, undefined)).toHaveLength(29);
    // A term shorter than two ticks: renewed at every tick.
    expect(renewalTimes(100, 20, 30)).toEqual([20, 40, 60, 80]);
  });

  it("a message's visibility started at its receive, which only a first receive stamps", () => {
    const at = new Date("2026-12-06T10:00:00.000Z");
    expect(receivedAt(sqsRecord({ body: "{}", receiveCount: 1, firstReceivedAt: at }))).toBe(
      at.getTime(),
    );
    expect(receivedAt(sqsRecord({ body: "{}", receiveCount: 2, firstReceivedAt: at }))).toBe(
      Number.NEGATIVE_INFINITY,
    );
  });
});
