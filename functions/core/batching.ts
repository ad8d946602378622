/**
 * Split items into chunks that respect an entry-count limit and a total-size limit, keeping order.
 * An item larger than `maxBytes` on its own gets a chunk of its own (the service will reject it
 * with a per-entry error, which the caller reports).
 */
export function chunk<T>(
  items: readonly T[],
  sizeOf: (item: T) => number,
  maxEntries: number,
  maxBytes: number,
): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = sizeOf(item);
    if (current.length > 0 && (current.length >= maxEntries || bytes + size > maxBytes)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Full-jitter exponential backoff: random in [0, min(cap, base * 2^attempt)). */
export function backoff(
  attempt: number,
  baseMs = 50,
  capMs = 2000,
  random: () => number = Math.random,
): number {
  return Math.floor(random() * Math.min(capMs, baseMs * 2 ** attempt));
}
