import { monotonicFactory } from "ulid";
import type { Clock, IdSource } from "./ports";

export const systemClock: Clock = { now: () => new Date() };

/** ULIDs from one monotonic factory: strictly increasing within the process. */
export function ulidSource(clock: Clock = systemClock): IdSource {
  const factory = monotonicFactory();
  return { next: () => factory(clock.now().getTime()) };
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
