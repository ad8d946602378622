import { TenantId } from "../../schemas/ids";
import * as z from "../../schemas/zod";
import { callsThisMinute, type ModelControls, stopMessage, stopOn } from "../core/model-guard";
import { DEFAULT_RUNS_IN_FLIGHT } from "./runs-in-flight";

/**
 * A tenant's limits at the front door: its requests per minute that put something on the bus
 * (below) and its workflow runs in flight (./runs-in-flight.ts). Every tenant has the stack's,
 * unless the stack gives it its own (`tenantLimits`, by tenant id: either limit or both; the
 * other is the stack's).
 */
export interface TenantCaps {
  readonly requestsPerMinute: number;
  readonly runsInFlight: number;
}

export const DEFAULT_REQUESTS_PER_MINUTE = 600;
export const DEFAULT_TENANT_CAPS: TenantCaps = {
  requestsPerMinute: DEFAULT_REQUESTS_PER_MINUTE,
  runsInFlight: DEFAULT_RUNS_IN_FLIGHT,
};

export const RequestsPerMinute = z.number().check(z.int(), z.minimum(1), z.maximum(1_000_000));
export const RunsInFlightCap = z.number().check(z.int(), z.minimum(1), z.maximum(1000));

/** Tenants' own limits, by tenant id (the stack's `tenantLimits`, the function's `TENANT_LIMITS`). */
export const TenantLimitOverrides = z.record(
  TenantId,
  z.strictObject({
    requestsPerMinute: z.optional(RequestsPerMinute),
    runsInFlight: z.optional(RunsInFlightCap),
  }),
);
export type TenantLimitOverrides = z.infer<typeof TenantLimitOverrides>;

/** `tenant`'s limits: its own where the stack gives them, else the stack's. */
export function capsOf(
  tenant: string,
  stack: TenantCaps,
  overrides: TenantLimitOverrides | undefined,
): TenantCaps {
  const own = overrides?.[tenant];
  return {
    requestsPerMinute: own?.requestsPerMinute ?? stack.requestsPerMinute,
    runsInFlight: own?.runsInFlight ?? stack.runsInFlight,
  };
}

/**
 * A tenant's cap on requests per minute at the front door: a fixed one-minute window per tenant,
 * counted in one item per tenant and minute. The request over the cap is refused (429) with
 * `Retry-After` the seconds left in the minute, and is not counted.
 */
export interface TenantLimits {
  /** Count one request of `tenant` at `now` unless its minute has `perMinute` already. */
  take(
    tenant: string,
    now: Date,
    perMinute: number,
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

  async take(tenant: string, now: Date, perMinute: number) {
    const { minute, secondsLeft } = minuteOf(now);
    const key = `${tenant}#${minute}`;
    const count = this.counts.get(key) ?? 0;
    if (count >= perMinute) return { retryAfterSeconds: secondsLeft };
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
