import { createHash, randomBytes } from "node:crypto";
import { encodeTime } from "ulid";
import type { Clock, IdSource } from "./ports";

/**
 * Event ids that say where their trace is. An id is a ULID (schemas/ids.ts): 48 bits of time, then
 * 80 bits that a plain ULID fills at random. The hub mints the ids of the events it stores with
 * the correlation they will carry, and puts a digest of that correlation in the low 40 of those
 * bits (the last 8 characters): so a trace by a stored event's id finds the event's correlation
 * from the id alone, in the events table's trace index keyed by that digest (trace-by-digest,
 * functions/adapters/dynamodb/tables.ts), and no index needs an entry for every event by its id.
 *
 * The high 40 bits are random when the time moves on and one more than the last id's within one
 * millisecond (or when the clock steps back), so the ids of one source stay strictly increasing
 * whatever their correlations: unique within the process, and across processes as a ULID with 40
 * random bits per correlation and millisecond.
 */

/** Characters of a ULID's time, and of each 40-bit half of its other 80 bits. */
const TIME_LENGTH = 10;
const HALF_LENGTH = 8;

/** Crockford's base 32, as ULIDs are written. */
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

const HALF_LIMIT = 2 ** 40;

/** A number below 2^40 as 8 Crockford characters. */
function encodeHalf(value: number): string {
  let text = "";
  let rest = value;
  for (let i = 0; i < HALF_LENGTH; i++) {
    text = ALPHABET.charAt(rest % 32) + text;
    rest = Math.floor(rest / 32);
  }
  return text;
}

/** 40 bits read from the first 5 bytes of `bytes`. */
function halfOf(bytes: Uint8Array): number {
  let value = 0;
  for (let i = 0; i < 5; i++) value = value * 256 + (bytes[i] ?? 0);
  return value;
}

/** The digest of a correlation an event id carries: 8 Crockford characters (40 bits of SHA-256). */
export function correlationDigest(correlationId: string): string {
  return encodeHalf(halfOf(createHash("sha256").update(correlationId).digest()));
}

/**
 * The correlation digest an event id would carry (its last 8 characters, upper case): whether it
 * does is known only from the events stored under that digest.
 */
export function digestOfEventId(eventId: string): string {
  return eventId.slice(TIME_LENGTH + HALF_LENGTH).toUpperCase();
}

/** Whether an event id carries the digest of this correlation (it was minted for it). */
export function carriesCorrelationDigest(eventId: string, correlationId: string): boolean {
  return (
    eventId.length === TIME_LENGTH + 2 * HALF_LENGTH &&
    digestOfEventId(eventId) === correlationDigest(correlationId)
  );
}

/**
 * A monotonic source of ULIDs: `next(correlationId)` mints the id of an event stored in that
 * correlation (its digest in the low 40 bits), `next()` any other id (those bits random).
 */
export function eventIdSource(clock: Clock): IdSource {
  let lastTime = -1;
  let lastHigh = 0;
  return {
    next(correlationId?: string): string {
      const now = clock.now().getTime();
      if (now > lastTime) {
        lastTime = now;
        // A random start below half the range leaves room to count up within the millisecond.
        lastHigh = halfOf(randomBytes(5)) % (HALF_LIMIT / 2);
      } else {
        lastHigh += 1;
        if (lastHigh >= HALF_LIMIT)
          throw new Error("event ids: too many ids minted within one millisecond");
      }
      const low =
        correlationId === undefined
          ? encodeHalf(halfOf(randomBytes(5)))
          : correlationDigest(correlationId);
      return encodeTime(lastTime, TIME_LENGTH) + encodeHalf(lastHigh) + low;
    },
  };
}
