import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import type { Envelope, Topic } from "../../../schemas";
import { envelopeJson } from "./deflated-json";
import { storedTopicOf } from "./items";
import { EventAttr } from "./tables";

export interface SkippedStreamRecord {
  /** The record's eventID (the Lambda batch item identifier), when present. */
  readonly eventId: string | undefined;
  readonly sequenceNumber: string | undefined;
  readonly reason: "no_new_image" | "no_envelope" | "invalid_envelope_json";
  readonly message: string;
}

export interface StreamEnvelopes {
  /** Envelopes of the INSERT records, in record order (per item, stream order). */
  readonly envelopes: Envelope[];
  /** INSERT records that carry no usable envelope. */
  readonly skipped: SkippedStreamRecord[];
  /** MODIFY / REMOVE records: the events table is append-only, so these carry no new event. */
  readonly ignored: number;
  /**
   * The topic stored with each envelope at commit (EventAttr.topic), by event id; an event stored
   * before topics were (or with a topic this relay has no bus for) has none.
   */
  readonly topics: Map<string, Topic>;
}

/**
 * Turn the events table's stream records (NEW_IMAGE, as Lambda delivers them) into the envelopes
 * the relay publishes. Only INSERT records are events; the envelope is the `envelope` attribute,
 * stored as the JSON the producer validated (or `envelope_z`, that JSON deflated), with the topic
 * its producer's registry gave (`topic`). The envelope is not re-validated here: the relay
 * publishes exactly what the event store holds, and consumers validate on receipt.
 */
export function envelopesFromStreamRecords(records: readonly DynamoDBRecord[]): StreamEnvelopes {
  const envelopes: Envelope[] = [];
  const skipped: SkippedStreamRecord[] = [];
  const topics = new Map<string, Topic>();
  let ignored = 0;
  for (const record of records) {
    if (record.eventName !== "INSERT") {
      ignored++;
      continue;
    }
    const skip = (reason: SkippedStreamRecord["reason"], message: string) =>
      skipped.push({
        eventId: record.eventID,
        sequenceNumber: record.dynamodb?.SequenceNumber,
        reason,
        message,
      });
    const image = record.dynamodb?.NewImage;
    if (!image) {
      skip("no_new_image", "the record has no NewImage (is the stream view NEW_IMAGE?)");
      continue;
    }
    // aws-lambda's AttributeValue and the SDK's are the same wire shape under different types.
    // wrapNumbers: a number attribute beyond 2^53 must not make the whole batch throw.
    const item = unmarshall(image as Record<string, AttributeValue>, { wrapNumbers: true });
    let raw: string | undefined;
    try {
      raw = envelopeJson(item);
    } catch (error) {
      skip(
        "invalid_envelope_json",
        `${EventAttr.envelopeDeflated} does not inflate: ${String(error)}`,
      );
      continue;
    }
    if (raw === undefined) {
      skip(
        "no_envelope",
        `the item has no string attribute "${EventAttr.envelope}" nor a binary "${EventAttr.envelopeDeflated}"`,
      );
      continue;
    }
    let envelope: Envelope;
    try {
      envelope = JSON.parse(raw) as Envelope;
    } catch (error) {
      skip("invalid_envelope_json", error instanceof Error ? error.message : String(error));
      continue;
    }
    envelopes.push(envelope);
    const topic = storedTopicOf(item);
    if (topic) topics.set(envelope.event_id, topic);
  }
  return { envelopes, skipped, ignored, topics };
}
