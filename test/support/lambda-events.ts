import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Message } from "@aws-sdk/client-sqs";
import { marshall } from "@aws-sdk/util-dynamodb";
import type {
  AttributeValue,
  DynamoDBRecord,
  DynamoDBStreamEvent,
  EventBridgeEvent,
  SQSEvent,
  SQSMessageAttributes,
  SQSRecord,
} from "aws-lambda";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import { EVENT_SOURCE } from "../../functions/adapters/eventbridge/publisher";

/**
 * Lambda events as AWS delivers them to the AgentBus handlers, modelled on the record factories
 * of Powertools' batch tests (packages/batch/tests/helpers/factories.ts) but with the FIFO,
 * EventBridge-target and NEW_IMAGE-stream details the handlers read.
 */

export const ACCOUNT_ID = "123456789012";
export const REGION = "us-east-1";
/** The principal SQS reports as sender (the one Powertools' factories use). */
const SENDER_ID = "AIDAIENQZJOLO23YVJ4VO";

// SQS FIFO sequence numbers and DynamoDB stream sequence numbers: large, increasing, as strings.
let sqsSequence = 18_849_496_460_467_696_128n;
let streamSequence = 4_421_584_500_000_000_017_450_439_091n;

/** `arn:aws:sqs:<region>:<account>:<name>` of a queue URL (`.../<account>/<name>`, as moto returns). */
export function queueArnOf(queueUrl: string, region = REGION): string {
  const [name, account] = new URL(queueUrl).pathname.split("/").filter(Boolean).reverse();
  return `arn:aws:sqs:${region}:${account ?? ACCOUNT_ID}:${name ?? "queue"}`;
}

export interface SqsRecordOptions {
  readonly body: string;
  readonly messageId?: string;
  readonly receiptHandle?: string;
  /**
   * The message group: set for a FIFO queue. The record then carries MessageGroupId,
   * MessageDeduplicationId and SequenceNumber, and its default source ARN ends with `.fifo`.
   */
  readonly groupId?: string;
  /** FIFO only; defaults to the SHA-256 of the body (as content-based deduplication does). */
  readonly deduplicationId?: string;
  readonly sequenceNumber?: string;
  /** ApproximateReceiveCount: 1 on the first delivery. */
  readonly receiveCount?: number;
  readonly sentAt?: Date;
  readonly firstReceivedAt?: Date;
  readonly messageAttributes?: SQSMessageAttributes;
  /** ARN of the source queue; see queueArnOf. */
  readonly queueArn?: string;
  readonly awsRegion?: string;
}

/** One record of an SQSEvent, shaped like Lambda's event source mapping delivers it. */
export function sqsRecord(options: SqsRecordOptions): SQSRecord {
  const fifo = options.groupId !== undefined;
  const sentAt = options.sentAt ?? new Date();
  const firstReceivedAt = options.firstReceivedAt ?? new Date(sentAt.getTime() + 3);
  const region = options.awsRegion ?? REGION;
  return {
    messageId: options.messageId ?? randomUUID(),
    receiptHandle: options.receiptHandle ?? `AQEB${randomBytes(96).toString("base64")}`,
    body: options.body,
    attributes: {
      ApproximateReceiveCount: String(options.receiveCount ?? 1),
      SentTimestamp: String(sentAt.getTime()),
      SenderId: SENDER_ID,
      ApproximateFirstReceiveTimestamp: String(firstReceivedAt.getTime()),
      ...(fifo
        ? {
            SequenceNumber: options.sequenceNumber ?? String(sqsSequence++),
            MessageGroupId: options.groupId,
            MessageDeduplicationId:
              options.deduplicationId ?? createHash("sha256").update(options.body).digest("hex"),
          }
        : {}),
    },
    messageAttributes: options.messageAttributes ?? {},
    md5OfBody: createHash("md5").update(options.body).digest("hex"),
    eventSource: "aws:sqs",
    eventSourceARN:
      options.queueArn ?? `arn:aws:sqs:${region}:${ACCOUNT_ID}:agentbus-test${fifo ? ".fifo" : ""}`,
    awsRegion: region,
  };
}

/**
 * The record Lambda would build from a message received with ReceiveMessage (ask for
 * MessageSystemAttributeNames ["All"]): same id, receipt handle, body and system attributes.
 */
export function sqsRecordFromMessage(message: Message, queueUrl: string): SQSRecord {
  const a = message.Attributes ?? {};
  const at = (ms: string | undefined) => (ms ? new Date(Number(ms)) : undefined);
  const record = sqsRecord({
    body: message.Body ?? "",
    messageId: message.MessageId,
    receiptHandle: message.ReceiptHandle,
    groupId: a.MessageGroupId,
    deduplicationId: a.MessageDeduplicationId,
    sequenceNumber: a.SequenceNumber,
    receiveCount: Number(a.ApproximateReceiveCount ?? "1"),
    sentAt: at(a.SentTimestamp),
    firstReceivedAt: at(a.ApproximateFirstReceiveTimestamp),
    queueArn: queueArnOf(queueUrl),
  });
  return a.SenderId
    ? { ...record, attributes: { ...record.attributes, SenderId: a.SenderId } }
    : record;
}

export function sqsEvent(records: readonly SQSRecord[]): SQSEvent {
  return { Records: [...records] };
}

export interface EventBridgeEnvelopeOptions {
  readonly id?: string;
  /** Defaults to the detail's `event_type` (what the relay puts as DetailType). */
  readonly detailType?: string;
  /** Defaults to "agentbus", the source the relay puts (rules match on the `agentbus` prefix). */
  readonly source?: string;
  /** Defaults to the detail's `occurred_at` (the relay's Time), else now; whole seconds, as AWS. */
  readonly time?: Date;
  readonly account?: string;
  readonly region?: string;
  readonly resources?: string[];
}

/**
 * An envelope as EventBridge delivers it to an SQS target: the message body is this object as
 * JSON (`JSON.stringify(eventBridgeEnvelope(envelope))`).
 */
export function eventBridgeEnvelope<T>(
  detail: T,
  options: EventBridgeEnvelopeOptions = {},
): EventBridgeEvent<string, T> {
  const fields = (detail ?? {}) as { event_type?: unknown; occurred_at?: unknown };
  const occurred =
    typeof fields.occurred_at === "string" ? new Date(fields.occurred_at) : undefined;
  const time =
    options.time ?? (occurred && !Number.isNaN(occurred.getTime()) ? occurred : new Date());
  return {
    version: "0",
    id: options.id ?? randomUUID(),
    "detail-type":
      options.detailType ??
      (typeof fields.event_type === "string" ? fields.event_type : "agentbus.test"),
    source: options.source ?? EVENT_SOURCE,
    account: options.account ?? ACCOUNT_ID,
    time: `${time.toISOString().slice(0, 19)}Z`,
    region: options.region ?? REGION,
    resources: options.resources ?? [],
    detail,
  };
}

export interface DynamoStreamRecordOptions {
  readonly eventName?: "INSERT" | "MODIFY" | "REMOVE";
  /** Key attributes of the table; defaults to the events table's (`pk`, `version`). */
  readonly keys?: readonly string[];
  readonly tableName?: string;
  readonly sequenceNumber?: string;
  readonly eventId?: string;
  readonly createdAt?: Date;
  readonly awsRegion?: string;
}

const EVENTS_KEYS = [TABLES.events.partitionKey.name, TABLES.events.sortKey.name];

/**
 * One record of a DynamoDB stream with view type NEW_IMAGE, as Lambda delivers it: the item is
 * marshalled into `NewImage` (absent for REMOVE, which has no new image) and its key attributes
 * into `Keys`.
 */
export function dynamoStreamRecord(
  item: Record<string, unknown>,
  options: DynamoStreamRecordOptions = {},
): DynamoDBRecord {
  const eventName = options.eventName ?? "INSERT";
  const image = marshall(item, { removeUndefinedValues: true });
  const keyNames = options.keys ?? EVENTS_KEYS;
  const keys = Object.fromEntries(
    keyNames.flatMap((name) => (image[name] ? [[name, image[name]]] : [])),
  );
  const region = options.awsRegion ?? REGION;
  const tableName = options.tableName ?? "agentbus-test-events";
  const createdAt = options.createdAt ?? new Date();
  // aws-lambda's AttributeValue and the SDK's are the same wire shape under different types;
  // Lambda's JSON carries a binary value as base64 text.
  const newImage =
    eventName === "REMOVE" ? undefined : (base64Binaries(image) as Record<string, AttributeValue>);
  return {
    eventID: options.eventId ?? randomBytes(16).toString("hex"),
    eventName,
    eventVersion: "1.1",
    eventSource: "aws:dynamodb",
    awsRegion: region,
    dynamodb: {
      ApproximateCreationDateTime: Math.floor(createdAt.getTime() / 1000),
      Keys: keys as Record<string, AttributeValue>,
      ...(newImage ? { NewImage: newImage } : {}),
      SequenceNumber: options.sequenceNumber ?? String(streamSequence++),
      SizeBytes: Buffer.byteLength(JSON.stringify({ keys, newImage })),
      StreamViewType: "NEW_IMAGE",
    },
    eventSourceARN: `arn:aws:dynamodb:${region}:${ACCOUNT_ID}:table/${tableName}/stream/2026-01-01T00:00:00.000`,
  };
}

function base64Binaries(image: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(image).map(([name, value]) => {
      const binary = (value as { B?: unknown }).B;
      return [
        name,
        binary instanceof Uint8Array ? { B: Buffer.from(binary).toString("base64") } : value,
      ];
    }),
  );
}

export function dynamoStreamEvent(records: readonly DynamoDBRecord[]): DynamoDBStreamEvent {
  return { Records: [...records] };
}
