import type { Envelope } from "../../../schemas";
import { streamKey } from "./tables";

/**
 * A relay failure record: the stream keys (`pk`, `version` of the events table) of the events the
 * relay could not publish after its retries, which it sends to its failure queue before it fails
 * the stream batch. `agentbus republish --failures` reads those events by their keys
 * (BatchGetItem), however old they are. The stream event source's own record of a batch it gave
 * up on (`DDBStreamBatchInfo`: shard and sequence numbers, no keys) is read from the stream
 * instead, which keeps 24 hours.
 */
export interface RelayFailureRecord {
  readonly relayFailure: {
    readonly error: { readonly code: string; readonly message: string };
    readonly events: readonly RelayFailureKey[];
  };
}

export interface RelayFailureKey {
  readonly pk: string;
  readonly version: number;
  readonly eventId: string;
}

/** Keys per record: about 100 bytes each, so a record stays far below SQS's 256 KB. */
export const RELAY_FAILURE_KEYS_PER_RECORD = 500;

/** The records of these unpublished events, at most RELAY_FAILURE_KEYS_PER_RECORD keys each. */
export function relayFailureRecords(
  unpublished: readonly Envelope[],
  error: { readonly code: string; readonly message: string },
): RelayFailureRecord[] {
  const records: RelayFailureRecord[] = [];
  for (let i = 0; i < unpublished.length; i += RELAY_FAILURE_KEYS_PER_RECORD)
    records.push({
      relayFailure: {
        error,
        events: unpublished.slice(i, i + RELAY_FAILURE_KEYS_PER_RECORD).map((e) => ({
          pk: streamKey(e.aggregate),
          version: e.aggregate.version,
          eventId: e.event_id,
        })),
      },
    });
  return records;
}

/** The keys a failure queue message body names, when it is a relay failure record. */
export function relayFailureKeysOf(body: unknown): RelayFailureKey[] | undefined {
  const events = (body as Partial<RelayFailureRecord> | undefined)?.relayFailure?.events;
  if (!Array.isArray(events)) return undefined;
  return events.filter(
    (k): k is RelayFailureKey =>
      typeof k?.pk === "string" && Number.isInteger(k?.version) && typeof k?.eventId === "string",
  );
}
