/** The UTF-8 size of a value's JSON, as DynamoDB and EventBridge count it. */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? "", "utf8");
}

/**
 * The newest items (the end of `items`) whose JSON sizes add up to at most `maxBytes`, oldest
 * first; the newest is always kept. Bounds what a state item keeps per entry, so no sequence of
 * messages can grow it past DynamoDB's 400 KB item limit.
 */
export function newestWithin<T>(items: readonly T[], maxBytes: number): T[] {
  let total = 0;
  let start = items.length;
  while (start > 0) {
    const size = jsonBytes(items[start - 1]);
    if (start < items.length && total + size > maxBytes) break;
    total += size;
    start--;
  }
  return items.slice(start);
}
