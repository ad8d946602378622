/**
 * How large a message can be, known without serializing it: the registry checks every message
 * against the size limit, and a walk over a message of a few hundred bytes costs a fraction of
 * `JSON.stringify`. Only a message the bound cannot clear is serialized and counted exactly.
 */

/** Deeper nesting is left to `JSON.stringify`, which says what is wrong with it. */
const MAX_DEPTH = 64;
/** `\u00XX`: the longest form one UTF-16 code unit takes in JSON text, in bytes of UTF-8. */
const BYTES_PER_CODE_UNIT = 6;
/**
 * The longest number JSON.stringify writes: 17 significant digits in fixed notation below 1e-5
 * (`-0.0000012345678901234567`, 25 characters; from 1e-7 down it switches to exponent notation,
 * at most `-1.2345678901234567e-308`, 24).
 */
const NUMBER_BYTES = 25;

/**
 * An upper bound of the UTF-8 bytes of `JSON.stringify(value)`, or a number past `limit` once the
 * walk has passed it; undefined when the value is not plain JSON data (a class instance such as a
 * Date, a bigint, a function, nesting past 64 levels or a cycle): only serializing it tells.
 */
export function jsonBytesAtMost(value: unknown, limit: number): number | undefined {
  const total = bound(value, 0, 0, limit);
  return total === NOT_PLAIN ? undefined : total;
}

const NOT_PLAIN = -1;

/**
 * `total` plus the bound of `v`, or NOT_PLAIN. A function of its own rather than a closure over
 * the running total: it runs on every message, and a closure's captured counter is slower to
 * update than an argument.
 */
function bound(v: unknown, depth: number, total: number, limit: number): number {
  if (total > limit) return total;
  switch (typeof v) {
    case "string":
      return total + 2 + BYTES_PER_CODE_UNIT * v.length;
    case "number":
      return total + NUMBER_BYTES;
    case "boolean":
    case "undefined":
      return total + 5;
    case "object":
      break;
    default:
      return NOT_PLAIN;
  }
  if (v === null) return total + 4;
  if (depth >= MAX_DEPTH) return NOT_PLAIN;
  let sum = total;
  if (Array.isArray(v)) {
    sum += 2 + v.length;
    for (let i = 0; i < v.length; i++) {
      sum = bound(v[i], depth + 1, sum, limit);
      if (sum === NOT_PLAIN) return NOT_PLAIN;
    }
    return sum;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return NOT_PLAIN;
  sum += 2;
  const record = v as Record<string, unknown>;
  for (const key in record) {
    sum = bound(record[key], depth + 1, sum + 4 + BYTES_PER_CODE_UNIT * key.length, limit);
    if (sum === NOT_PLAIN) return NOT_PLAIN;
  }
  return sum;
}
