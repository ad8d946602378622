import { createHash } from "node:crypto";
import { type Envelope, envelopeBytes, MAX_ENVELOPE_BYTES } from "../../schemas";
import { PermanentError } from "./errors";
import type { EventStore } from "./ports";

/**
 * The claim check: an event too large for a bus or a queue (EventBridge and SQS take 256 KB an
 * entry or a message) travels without its payload, and its consumer reads it from where it is
 * already stored once, its stream in the event store, at the envelope's aggregate and version.
 *
 * - The relay (./relay.ts) publishes an envelope over CLAIM_ABOVE_BYTES as its claim
 *   (`claimOf`): the envelope with `payload: null` and `claim_check` = the SHA-256 of the
 *   payload's JSON and its size. Nothing more is written: the event store has the event, and
 *   keeps its personal fields sealed as it keeps every event's.
 * - The consumer pipeline (./pipeline.ts) opens a claim before it validates the message
 *   (`openClaim`): it reads the event from the stream (one read; the store opens sealed fields)
 *   and checks it is the event claimed, by id and by hash. A claim of an event the stream does
 *   not hold, or whose payload hashes otherwise, is a permanent error: a retry reads the same.
 * - A producer can append no envelope over MAX_STORED_ENVELOPE_BYTES (./emit.ts): it fails at once,
 *   permanently, naming the producer, and nothing is stored.
 *
 * Messages from outside a stream (version 0: a client's, a heartbeat) have nowhere to be read
 * from, and keep the bus's limit.
 */

/**
 * Envelopes above this many bytes of JSON travel as their claim: what is left of the bus's
 * limit once EventBridge has wrapped the envelope in an event of its own (source, detail-type,
 * time, resources, ids), which is the message a rule delivers to a queue.
 */
export const CLAIM_ABOVE_BYTES = MAX_ENVELOPE_BYTES - 4096;

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** The hex SHA-256 of a payload's JSON. */
export function payloadHash(payload: unknown): string {
  return sha256(JSON.stringify(payload) ?? "null");
}

/** The envelope as it travels: itself, or its claim when it is too large for a bus. */
export function claimOf(envelope: Envelope): Envelope {
  if (envelope.aggregate.version === 0 || envelopeBytes(envelope) <= CLAIM_ABOVE_BYTES)
    return envelope;
  const json = JSON.stringify(envelope.payload) ?? "null";
  return {
    ...envelope,
    payload: null,
    claim_check: { sha256: sha256(json), bytes: Buffer.byteLength(json, "utf8") },
  };
}

/**
 * The message with its claim opened: the event read from its stream, checked against the claim;
 * any other message as it is.
 */
export async function openClaim(
  raw: unknown,
  store: Pick<EventStore, "readStream">,
): Promise<unknown> {
  if (!raw || typeof raw !== "object" || !("claim_check" in raw)) return raw;
  const claim = raw as Partial<Envelope>;
  const { aggregate, claim_check: check, event_id: eventId } = claim;
  if (!aggregate || !check || typeof aggregate.version !== "number" || aggregate.version < 1)
    throw new PermanentError(
      "claim.invalid",
      `event ${String(eventId)} carries a claim check but names no position in a stream`,
      { details: { eventId } },
    );
  const [stored] = await store.readStream(aggregate, aggregate.version, aggregate.version);
  if (!stored || stored.event_id !== eventId)
    throw new PermanentError(
      "claim.missing",
      `the claim of event ${String(eventId)} names ${aggregate.type}/${aggregate.id} v${aggregate.version}, where the event store holds ${stored ? `event ${stored.event_id}` : "nothing"}`,
      { details: { eventId, aggregate } },
    );
  if (payloadHash(stored.payload) !== check.sha256)
    throw new PermanentError(
      "claim.mismatch",
      `the payload of event ${eventId} in its stream does not hash to its claim's ${check.sha256}`,
      { details: { eventId, aggregate } },
    );
  return stored;
}
