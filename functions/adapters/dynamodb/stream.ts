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

/** What one record of the events table's stream holds (streamRecordEvent). */
export type StreamRecordEvent =
  | {
      readonly kind: "event";
      /** The envelope's JSON as the event store holds it (inflated when stored deflated). */
      readonly json: string;
      /** The topic stored with the event at commit (EventAttr.topic), if any. */
      readonly topic: Topic | undefined;
    }
  | { readonly kind: "skipped"; readonly skipped: SkippedStreamRecord }
  /** MODIFY / REMOVE: the events table is append-only, so these carry no new event. */
  | { readonly kind: "ignored" };

/**
 * One record of the events table's stream (NEW_IMAGE, as Lambda delivers it): only an INSERT is an
 * event; its envelope is the `envelope` attribute, stored as the JSON the producer validated (or
 * `envelope_z`, that JSON deflated), with the topic its producer's registry gave (`topic`). The
 * JSON is not parsed nor validated here.
 */
export function streamRecordEvent(record: DynamoDBRecord): StreamRecordEvent {
  if (record.eventName !== "INSERT") return { kind: "ignored" };
  const skip = (reason: SkippedStreamRecord["reason"], message: string) =>
    ({
      kind: "skipped",
      skipped: {
        eventId: record.eventID,
        sequenceNumber: record.dynamodb?.SequenceNumber,
        reason,
        message,
      },
    }) as const;
  const image = record.dynamodb?.NewImage;
  if (!image)
    return skip("no_new_image", "the record has no NewImage (is the stream view NEW_IMAGE?)");
  // aws-lambda's AttributeValue and the SDK's are the same wire shape under different types.
  // wrapNumbers: a number attribute beyond 2^53 must not make the whole batch throw.
  const item = unmarshall(image as Record<string, AttributeValue>, { wrapNumbers: true });
  let json: string | undefined;
  try {
    json = envelopeJson(item);
  } catch (error) {
    return skip(
      "invalid_envelope_json",
      `${EventAttr.envelopeDeflated} does not inflate: ${String(error)}`,
    );
  }
  if (json === undefined)
    return skip(
      "no_envelope",
      `the item has no string attribute "${EventAttr.envelope}" nor a binary "${EventAttr.envelopeDeflated}"`,
    );
  return { kind: "event", json, topic: storedTopicOf(item) };
}

/**
 * Turn the events table's stream records into the envelopes the relay publishes (each record as
 * streamRecordEvent reads it). The envelope is not re-validated here: the relay publishes exactly
 * what the event store holds, and consumers validate on receipt.
 */
export function envelopesFromStreamRecords(records: readonly DynamoDBRecord[]): StreamEnvelopes {
  const envelopes: Envelope[] = [];
  const skipped: SkippedStreamRecord[] = [];
  const topics = new Map<string, Topic>();
  let ignored = 0;
  for (const record of records) {
    const read = streamRecordEvent(record);
    if (read.kind === "ignored") {
      ignored++;
      continue;
    }
    if (read.kind === "skipped") {
      skipped.push(read.skipped);
      continue;
    }
    let envelope: Envelope;
    try {
      envelope = JSON.parse(read.json) as Envelope;
    } catch (error) {
      skipped.push({
        eventId: record.eventID,
        sequenceNumber: record.dynamodb?.SequenceNumber,
        reason: "invalid_envelope_json",
        message: error instanceof Error ? error.message : String(error),
      });
      continue;
    }
    envelopes.push(envelope);
    if (read.topic) topics.set(envelope.event_id, read.topic);
  }
  return { envelopes, skipped, ignored, topics };
}
