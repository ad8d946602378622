import { callsThisMinute, type ModelControls, stopMessage, stopOn } from "../core/model-guard";

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

/** Why a tenant's new work is refused before anything is counted or written. */
export type TenantRefusal =
  | { readonly code: "tenant_stopped"; readonly detail: string }
  | {
      readonly code: "too_many_requests";
      readonly detail: string;
      readonly retryAfterSeconds: number;
    };

/**
 * Whether a tenant may start new work, from one read of its controls
 * (functions/core/model-guard.ts): refused while an operator's stop of the tenant stands, and
 * slowed (429, `Retry-After` the seconds left in the minute) while the model calls its work started
 * this minute are at its rate budget, before the model's service would throttle them.
 */
export async function tenantRefusal(
  controls: Pick<ModelControls, "read">,
  tenant: string,
  now: Date,
): Promise<TenantRefusal | undefined> {
  const reading = await controls.read({ tenant }, now);
  const stop = stopOn(reading, { tenant });
  if (stop) return { code: "tenant_stopped", detail: stopMessage(stop) };
  const calls = callsThisMinute(reading.tenantDay, now);
  const budget = reading.budgets.tenantCallsPerMinute;
  if (calls < budget) return undefined;
  return {
    code: "too_many_requests",
    detail: `tenant ${tenant} started ${calls} model calls this minute, its budget is ${budget}: new work waits for the next minute`,
    retryAfterSeconds: minuteOf(now).secondsLeft,
  };
}
