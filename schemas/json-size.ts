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
  let total = 0;
  const walk = (v: unknown, depth: number): boolean => {
    if (total > limit) return true;
    switch (typeof v) {
      case "string":
        total += 2 + BYTES_PER_CODE_UNIT * v.length;
        return true;
      case "number":
        total += NUMBER_BYTES;
        return true;
      case "boolean":
      case "undefined":
        total += 5;
        return true;
      case "object":
        break;
      default:
        return false;
    }
    if (v === null) {
      total += 4;
      return true;
    }
    if (depth >= MAX_DEPTH) return false;
    if (Array.isArray(v)) {
      total += 2 + v.length;
      for (const item of v) if (!walk(item, depth + 1)) return false;
      return true;
    }
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return false;
    total += 2;
    const record = v as Record<string, unknown>;
    for (const key in record) {
      total += 4 + BYTES_PER_CODE_UNIT * key.length;
      if (!walk(record[key], depth + 1)) return false;
    }
    return true;
  };
  return walk(value, 0) ? total : undefined;
}
