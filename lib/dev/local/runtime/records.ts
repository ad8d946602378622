import type { _Record as StreamRecord } from "@aws-sdk/client-dynamodb-streams";
import type { Message } from "@aws-sdk/client-sqs";
import type { DynamoDBRecord, SQSRecord } from "aws-lambda";

/** The event id of an envelope or of an EventBridge event around one, if the body has one. */
export function eventIdOf(body: string | undefined): string | undefined {
  try {
    const parsed = JSON.parse(body ?? "") as {
      event_id?: unknown;
      detail?: { event_id?: unknown };
    };
    const id = parsed.event_id ?? parsed.detail?.event_id;
    return typeof id === "string" ? id : undefined;
  } catch {
    return undefined;
  }
}

/** A received message as the SQS event source mapping hands it to Lambda. */
export function toSqsRecord(m: Message, arn: string, region: string): SQSRecord {
  const attributes = (m.Attributes ?? {}) as Record<string, string>;
  return {
    messageId: m.MessageId ?? "",
    receiptHandle: m.ReceiptHandle ?? "",
    body: m.Body ?? "",
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? "1",
      SentTimestamp: attributes.SentTimestamp ?? String(Date.now()),
      SenderId: attributes.SenderId ?? "local",
      ApproximateFirstReceiveTimestamp:
        attributes.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
      ...(attributes.MessageGroupId ? { MessageGroupId: attributes.MessageGroupId } : {}),
      ...(attributes.MessageDeduplicationId
        ? { MessageDeduplicationId: attributes.MessageDeduplicationId }
        : {}),
      ...(attributes.SequenceNumber ? { SequenceNumber: attributes.SequenceNumber } : {}),
    },
    messageAttributes: Object.fromEntries(
      Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
        k,
        {
          stringValue: v.StringValue,
          dataType: v.DataType ?? "String",
          stringListValues: [],
          binaryListValues: [],
        },
      ]),
    ),
    md5OfBody: m.MD5OfBody ?? "",
    eventSource: "aws:sqs",
    eventSourceARN: arn,
    awsRegion: region,
  };
}

/** A stream record as the DynamoDB event source mapping hands it to Lambda. */
export function toStreamRecord(r: StreamRecord, arn: string, region: string): DynamoDBRecord {
  const d = r.dynamodb;
  return {
    eventID: r.eventID,
    eventName: r.eventName as DynamoDBRecord["eventName"],
    eventVersion: r.eventVersion ?? "1.1",
    eventSource: "aws:dynamodb",
    awsRegion: region,
    eventSourceARN: arn,
    dynamodb: {
      Keys: d?.Keys as never,
      NewImage: d?.NewImage as never,
      OldImage: d?.OldImage as never,
      SequenceNumber: d?.SequenceNumber,
      SizeBytes: d?.SizeBytes,
      StreamViewType: d?.StreamViewType,
      ApproximateCreationDateTime: d?.ApproximateCreationDateTime
        ? Math.floor(new Date(d.ApproximateCreationDateTime).getTime() / 1000)
        : undefined,
    },
  };
}
