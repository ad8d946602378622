import { AgentBusError } from "../core/errors";

/**
 * The retry backoff of a failed record (consumer or dispatcher), in seconds: `base * 2^(n-1)` for
 * the n-th receive, at most `max`. The record's visibility is set to it, so it comes back then.
 */
export function retryDelaySeconds(receiveCount: number, base: number, max: number): number {
  return Math.min(max, base * 2 ** Math.max(0, receiveCount - 1));
}

/** The longest visibility timeout SQS accepts, in seconds (12 hours). */
export const MAX_VISIBILITY_SECONDS = 43_200;

/**
 * The backoff of a record that failed with `error`: the backoff above, or longer when the error
 * says when the service will take the call again (`details.retryAfterSeconds`, as a 429's
 * Retry-After: a throttled tool or provider), up to what SQS accepts.
 */
export function retryDelayFor(
  error: unknown,
  receiveCount: number,
  base: number,
  max: number,
): number {
  const backoff = retryDelaySeconds(receiveCount, base, max);
  const after =
    error instanceof AgentBusError ? Number(error.details.retryAfterSeconds) : Number.NaN;
  if (!Number.isFinite(after) || after <= backoff) return backoff;
  return Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(after));
}

/** How many times SQS has handed a record out (1 on the first delivery). */
export function receiveCountOf(record: { attributes: { ApproximateReceiveCount?: string } }) {
  return Number(record.attributes.ApproximateReceiveCount ?? "1");
}
