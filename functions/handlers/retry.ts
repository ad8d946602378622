/**
 * The retry backoff of a failed record (consumer or dispatcher), in seconds: `base * 2^(n-1)` for
 * the n-th receive, at most `max`. The record's visibility is set to it, so it comes back then.
 */
export function retryDelaySeconds(receiveCount: number, base: number, max: number): number {
  return Math.min(max, base * 2 ** Math.max(0, receiveCount - 1));
}

/** How many times SQS has handed a record out (1 on the first delivery). */
export function receiveCountOf(record: { attributes: { ApproximateReceiveCount?: string } }) {
  return Number(record.attributes.ApproximateReceiveCount ?? "1");
}
