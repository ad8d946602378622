import type { Clock, IdSource } from "../../../functions/core/ports";

/** A seeded generator of numbers in [0, 1) (mulberry32): one seed, one sequence, on any machine. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** An integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.below(items.length)];
    if (item === undefined) throw new Error("pick from an empty list");
    return item;
  }
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * ULIDs drawn from a seeded generator: the time part from the clock, the random part from
 * `random`, strictly increasing (a counter breaks ties within a millisecond), so a schedule's ids,
 * and with them its whole run, are the same every time its seed is played.
 */
export function seededIds(clock: Clock, random: Random): IdSource {
  let lastTime = -1;
  let counter = 0;
  return {
    next: () => {
      const time = clock.now().getTime();
      counter = time === lastTime ? counter + 1 : random.below(1 << 20);
      lastTime = time;
      let timePart = "";
      for (let t = time, i = 0; i < 10; i++, t = Math.floor(t / 32))
        timePart = CROCKFORD.charAt(t % 32) + timePart;
      let counterPart = "";
      for (let c = counter, i = 0; i < 6; i++, c = Math.floor(c / 32))
        counterPart = CROCKFORD.charAt(c % 32) + counterPart;
      let randomPart = "";
      for (let i = 0; i < 10; i++) randomPart += CROCKFORD.charAt(random.below(32));
      return timePart + counterPart + randomPart;
    },
  };
}
