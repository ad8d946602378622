/**
 * The plain data keys a function keeps in memory, bounded as the AWS Encryption SDK's caching
 * materials manager bounds its cache: an entry is used for at most `maxAgeMs` after it was read
 * and for at most `maxMessages` messages (each field sealed or opened with it counts), and at
 * most `maxEntries` are kept (the oldest read goes first). Past either bound the entry is stale:
 * the vault reads the customer's record again, so an erasure (the key deleted from the record)
 * takes effect in a warm function within `maxAgeMs`. That a key is erased is kept for good: key
 * ids are never reused.
 */

export interface KeyCacheLimits {
  /** How long a key read is used. @default KEY_CACHE_MS */
  readonly maxAgeMs?: number;
  /** How many fields one read of a key seals or opens. @default KEY_CACHE_MESSAGES */
  readonly maxMessages?: number;
  /** How many keys are kept. @default KEY_CACHE_ENTRIES */
  readonly maxEntries?: number;
}

/** Five minutes: the longest a warm function goes on using a key after its customer's erasure. */
export const KEY_CACHE_MS = 5 * 60_000;
export const KEY_CACHE_MESSAGES = 10_000;
export const KEY_CACHE_ENTRIES = 1_000;

interface Entry<T> {
  readonly value: T;
  readonly readAt: number;
  uses: number;
}

export class KeyCache<T> {
  private readonly entries = new Map<string, Entry<T>>();
  private readonly maxAgeMs: number;
  private readonly maxMessages: number;
  private readonly maxEntries: number;

  constructor(
    private readonly now: () => number,
    limits: KeyCacheLimits = {},
  ) {
    this.maxAgeMs = limits.maxAgeMs ?? KEY_CACHE_MS;
    this.maxMessages = limits.maxMessages ?? KEY_CACHE_MESSAGES;
    this.maxEntries = limits.maxEntries ?? KEY_CACHE_ENTRIES;
    for (const [name, value] of Object.entries({
      maxAgeMs: this.maxAgeMs,
      maxMessages: this.maxMessages,
      maxEntries: this.maxEntries,
    }))
      if (!Number.isInteger(value) || value < 1)
        throw new Error(`the key cache's ${name} must be a whole number >= 1, not ${value}`);
  }

  /** The entry's value, counted as one use, while it is within its bounds; else undefined. */
  use(name: string): T | undefined {
    const entry = this.entries.get(name);
    if (!entry) return undefined;
    if (this.now() - entry.readAt >= this.maxAgeMs || entry.uses >= this.maxMessages) {
      this.entries.delete(name);
      return undefined;
    }
    entry.uses++;
    return entry.value;
  }

  /** Keeps `value` as read now, counted as one use; the oldest entry goes when the cache is full. */
  keep(name: string, value: T): void {
    this.entries.delete(name);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(name, { value, readAt: this.now(), uses: 1 });
  }

  get size(): number {
    return this.entries.size;
  }
}
