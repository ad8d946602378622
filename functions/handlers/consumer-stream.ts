import type {
  DynamoDBBatchResponse,
  DynamoDBRecord,
  DynamoDBStreamEvent,
  SQSEvent,
  SQSRecord,
} from "aws-lambda";
import { streamRecordEvent } from "../adapters/dynamodb/stream";
import type { BatchFoldingStore } from "../core/batch-fold";

/**
 * A consumer group with `delivery: "stream"` reads the events table's stream (lib/infra/README.md):
 * each record is an event as the event store holds it, so as the bus carries it (personal fields
 * sealed, opened by the pipeline as for a queue message), never a claim check (the record is the
 * item, and an item of up to 400 KB fits Lambda's 6 MB payload whatever the envelope's size), and
 * never a replay. It goes through the same handling as a queue message; here it becomes one.
 */

/** The event source of a stream record, as Lambda names it (and of the messages made from one). */
export const STREAM_EVENT_SOURCE = "aws:dynamodb";

/** Whether a batch is of stream records rather than queue messages. */
export function isStreamEvent(event: SQSEvent | DynamoDBStreamEvent): event is DynamoDBStreamEvent {
  return event.Records.some((r) => r.eventSource === STREAM_EVENT_SOURCE);
}

/** Whether a message was made from a stream record: no queue holds it, nothing to extend. */
export function isStreamMessage(record: Pick<SQSRecord, "eventSource">): boolean {
  return record.eventSource === STREAM_EVENT_SOURCE;
}

/**
 * A stream record as the consumer handles a queue message: its body the stored envelope's JSON,
 * its id the record's sequence number, its first and only receive (the stream retries a batch,
 * it counts no receives), no receipt handle. A record that holds no envelope becomes a body that
 * names it, which the pipeline refuses as it refuses any invalid message (to the dead-letter
 * queue, with the reason). A MODIFY or REMOVE record (the event store never makes one) is none.
 */
export function messageOfStreamRecord(record: DynamoDBRecord): SQSRecord | undefined {
  const read = streamRecordEvent(record);
  if (read.kind === "ignored") return undefined;
  const sequenceNumber = record.dynamodb?.SequenceNumber ?? record.eventID ?? "";
  const body =
    read.kind === "event"
      ? read.json
      : JSON.stringify({
          stream_record: { keys: record.dynamodb?.Keys, sequence_number: sequenceNumber },
          problem: read.skipped.message,
        });
  const created = record.dynamodb?.ApproximateCreationDateTime;
  return {
    messageId: sequenceNumber,
    receiptHandle: "",
    body,
    attributes: {
      ApproximateReceiveCount: "1",
      SentTimestamp: created === undefined ? "" : String(created * 1000),
      SenderId: "",
      ApproximateFirstReceiveTimestamp: "",
    },
    messageAttributes: {},
    md5OfBody: "",
    eventSource: STREAM_EVENT_SOURCE,
    eventSourceARN: record.eventSourceARN ?? "",
    awsRegion: record.awsRegion ?? "",
  };
}

/** The writes a batch keeps until its end (core/batch-fold.ts BatchFoldingStore). */
export type KeptWrites = Pick<BatchFoldingStore, "keeping" | "flush" | "flushes">;

/**
 * Runs a batch of stream records in stream order through `handleMessage` (which throws only for
 * a record left to retry) and answers with the partial batch response: the first record that
 * failed, and nothing after it is handled, since Lambda retries the batch from that record on (its
 * later records come again, in order). Records that hold no event are acknowledged.
 *
 * With `kept`, the records' writes are made at the end of the batch, or before a record that
 * failed is reported: a failure to make them reports the first record whose write was kept
 * instead, so every record after it comes again.
 */
export async function processStreamBatch(
  event: DynamoDBStreamEvent,
  handleMessage: (message: SQSRecord) => Promise<void>,
  kept?: KeptWrites,
): Promise<DynamoDBBatchResponse> {
  const failedAt = (id: string) => ({ batchItemFailures: [{ itemIdentifier: id }] });
  // The first record whose write is kept and not made yet.
  let keptFrom: string | undefined;
  for (const record of event.Records) {
    const message = messageOfStreamRecord(record);
    if (!message) continue;
    const flushes = kept?.flushes;
    try {
      await handleMessage(message);
    } catch {
      const made = await kept?.flush().then(
        () => true,
        () => false,
      );
      return failedAt(made === false ? (keptFrom ?? message.messageId) : message.messageId);
    }
    if (!kept?.keeping()) keptFrom = undefined;
    else if (keptFrom === undefined || kept.flushes !== flushes) keptFrom = message.messageId;
  }
  if (kept && keptFrom !== undefined) {
    try {
      await kept.flush();
    } catch {
      return failedAt(keptFrom);
    }
  }
  return { batchItemFailures: [] };
}
