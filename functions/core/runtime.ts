import { eventIdSource } from "./event-ids";
import type { Clock, IdSource } from "./ports";

export const systemClock: Clock = { now: () => new Date() };

/**
 * ULIDs from one monotonic source: strictly increasing within the process; the id of a stored
 * event carries its correlation's digest (./event-ids.ts).
 */
export function ulidSource(clock: Clock = systemClock): IdSource {
  return eventIdSource(clock);
}

/** A clock tests and the local runtime can move by hand. */
export class ManualClock implements Clock {
  private current: number;
  constructor(start: Date | string = "2026-01-01T00:00:00.000Z") {
    this.current = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.current);
  }
  advance(ms: number): void {
    this.current += ms;
  }
}
