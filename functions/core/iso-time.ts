/**
 * `date.toISOString()`, at a fraction of its cost for times in the same second as the one before:
 * the pipeline stamps every record it writes, and formatting a date costs about 1 µs, as much as
 * the rest of a small commit. The second's text is kept and only the milliseconds are appended.
 */
let second = Number.NaN;
let prefix = "";

export function isoTime(date: Date): string {
  const ms = date.getTime();
  const s = Math.floor(ms / 1000);
  if (s !== second) {
    const iso = date.toISOString();
    // Years outside 0000-9999 are written with a sign and six digits: not kept.
    if (iso.length !== 24) return iso;
    second = s;
    prefix = iso.slice(0, 20);
    return iso;
  }
  const frac = ms - s * 1000;
  return `${prefix}${frac < 10 ? "00" : frac < 100 ? "0" : ""}${frac}Z`;
}
