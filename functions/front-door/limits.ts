/**
 * A tenant's cap on requests per minute at the front door: a fixed one-minute window per tenant,
 * counted in one item per tenant and minute. The request over the cap is refused (429) with
 * `Retry-After` the seconds left in the minute, and is not counted.
 */
export interface TenantLimits {
  /** Count one request of `tenant` at `now` unless its minute is full. */
  take(
    tenant: string,
    now: Date,
  ): Promise<{ readonly ok: true } | { readonly retryAfterSeconds: number }>;
}

/** The minute a request falls in (`2026-12-02T10:04`) and the seconds left in it (at least 1). */
export function minuteOf(now: Date): { readonly minute: string; readonly secondsLeft: number } {
  const minute = now.toISOString().slice(0, 16);
  const secondsLeft = Math.max(1, 60 - now.getUTCSeconds());
  return { minute, secondsLeft };
}

/** In memory, for tests. */
export class InMemoryTenantLimits implements TenantLimits {
  readonly counts = new Map<string, number>();

  constructor(private readonly perMinute: number) {}

  async take(tenant: string, now: Date) {
    const { minute, secondsLeft } = minuteOf(now);
    const key = `${tenant}#${minute}`;
    const count = this.counts.get(key) ?? 0;
    if (count >= this.perMinute) return { retryAfterSeconds: secondsLeft };
    this.counts.set(key, count + 1);
    return { ok: true as const };
  }
}
