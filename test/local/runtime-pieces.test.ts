import type { Message } from "@aws-sdk/client-sqs";
import type { DynamoDBRecord } from "aws-lambda";
import { describe, expect, it } from "vitest";
import type { LocalFunction, LocalMapping, LocalPipe } from "../../lib/dev/local/deploy";
import { Activity } from "../../lib/dev/local/runtime/activity";
import type { RuntimeEvent } from "../../lib/dev/local/runtime/events";
import { Faults } from "../../lib/dev/local/runtime/faults";
import { selected } from "../../lib/dev/local/runtime/filters";
import { handlerReport } from "../../lib/dev/local/runtime/handlers";
import { pipeEvent, pipeTargetMessage } from "../../lib/dev/local/runtime/pipe-input";
import { eventIdOf, toStreamRecord } from "../../lib/dev/local/runtime/records";
import { scheduledEvent } from "../../lib/dev/local/runtime/schedules";
import { failedItems, sqsEvent } from "../../lib/dev/local/runtime/sqs-mapping";
import { onFailureRecord } from "../../lib/dev/local/runtime/stream-mapping";

/** The local runtime's pieces that decide without AWS, as data. */
const fn: LocalFunction = {
  logicalId: "Consumer",
  name: "worker-consumer",
  entry: "functions/handlers/consumer.ts",
  kind: "consumer",
  group: "worker",
  environment: {},
  timeoutSeconds: 30,
  memoryMb: 256,
  architecture: "arm64",
};

describe("SQS mapping: partial batch response", () => {
  const ids = new Set(["a", "b", "c"]);
  const response = (...itemIdentifier: (string | undefined)[]) => ({
    batchItemFailures: itemIdentifier.map((id) => ({ itemIdentifier: id })),
  });

  it("leaves exactly the reported items on the queue", () => {
    expect(failedItems(response("b"), ids, true)).toEqual(new Set(["b"]));
    expect(failedItems(response(), ids, true)).toEqual(new Set());
    expect(failedItems(undefined, ids, true)).toEqual(new Set());
    expect(failedItems({ other: 1 }, ids, true)).toEqual(new Set());
  });

  it("fails the whole batch for an item id that is missing or not in the batch, as AWS does", () => {
    expect(failedItems(response("b", "z"), ids, true)).toEqual(ids);
    expect(failedItems(response(undefined), ids, true)).toEqual(ids);
    expect(failedItems(response(""), ids, true)).toEqual(ids);
  });

  it("ignores the response without ReportBatchItemFailures", () => {
    expect(failedItems(response("b"), ids, false)).toEqual(new Set());
  });

  it("hands the handler each message as a Lambda SQS record", () => {
    const message: Message = {
      MessageId: "m1",
      ReceiptHandle: "r1",
      Body: '{"event_id":"e1"}',
      MD5OfBody: "md5",
      Attributes: { ApproximateReceiveCount: "2", MessageGroupId: "g", SentTimestamp: "5" },
      MessageAttributes: { "agentbus.x": { DataType: "String", StringValue: "y" } },
    };
    const [record] = sqsEvent([message], "arn:q", "eu-west-1").Records;
    expect(record).toMatchObject({
      messageId: "m1",
      receiptHandle: "r1",
      body: '{"event_id":"e1"}',
      md5OfBody: "md5",
      eventSource: "aws:sqs",
      eventSourceARN: "arn:q",
      awsRegion: "eu-west-1",
      attributes: { ApproximateReceiveCount: "2", MessageGroupId: "g", SentTimestamp: "5" },
      messageAttributes: {
        "agentbus.x": {
          stringValue: "y",
          dataType: "String",
          stringListValues: [],
          binaryListValues: [],
        },
      },
    });
    expect(record?.attributes).not.toHaveProperty("MessageDeduplicationId");
  });

  it("finds the event id a lost acknowledgement is keyed by, in an envelope or an event", () => {
    expect(eventIdOf('{"event_id":"e1"}')).toBe("e1");
    expect(eventIdOf('{"detail":{"event_id":"e2"}}')).toBe("e2");
    expect(eventIdOf('{"event_id":7}')).toBeUndefined();
    expect(eventIdOf("not json")).toBeUndefined();
    expect(eventIdOf(undefined)).toBeUndefined();
  });
});

describe("fault injection", () => {
  it("loses one acknowledgement per event and group, once", () => {
    const faults = new Faults(() => {});
    faults.loseAckOnce("e1", "worker");
    expect(faults.takeLostAck("other", "e1")).toBe(false);
    expect(faults.takeLostAck("worker", "e1")).toBe(true);
    expect(faults.takeLostAck("worker", "e1")).toBe(false);
  });

  it("pauses and resumes groups and the stream, reporting a paused group", () => {
    const events: RuntimeEvent[] = [];
    const faults = new Faults((e) => events.push(e));
    faults.pauseGroup("worker");
    expect(faults.groupPaused("worker")).toBe(true);
    expect(faults.groupPaused("audit")).toBe(false);
    faults.resumeGroup("worker");
    expect(faults.groupPaused("worker")).toBe(false);
    expect(events).toEqual([{ kind: "fault", description: "paused consumer group worker" }]);
    faults.pauseStream();
    expect(faults.streamPaused).toBe(true);
    faults.resumeStream();
    expect(faults.streamPaused).toBe(false);
  });
});

describe("stream mapping", () => {
  const record = (seq: string, pk: string) =>
    toStreamRecord(
      {
        eventID: `id-${seq}`,
        eventName: "INSERT",
        dynamodb: {
          Keys: { pk: { S: pk } },
          NewImage: { pk: { S: pk } },
          SequenceNumber: seq,
          StreamViewType: "NEW_IMAGE",
          ApproximateCreationDateTime: new Date("2026-01-01T00:00:01.500Z"),
        },
      },
      "arn:stream",
      "us-east-1",
    );

  it("hands the handler each record as a Lambda DynamoDB record", () => {
    expect(record("1", "s#a")).toEqual({
      eventID: "id-1",
      eventName: "INSERT",
      eventVersion: "1.1",
      eventSource: "aws:dynamodb",
      awsRegion: "us-east-1",
      eventSourceARN: "arn:stream",
      dynamodb: {
        Keys: { pk: { S: "s#a" } },
        NewImage: { pk: { S: "s#a" } },
        OldImage: undefined,
        SequenceNumber: "1",
        SizeBytes: undefined,
        StreamViewType: "NEW_IMAGE",
        ApproximateCreationDateTime: 1_767_225_601,
      },
    });
  });

  it("selects the records some filter matches, all without filters", () => {
    const records: DynamoDBRecord[] = [record("1", "s#a"), record("2", "t#b")];
    const filter = { dynamodb: { NewImage: { pk: { S: [{ prefix: "s#" }] } } } };
    expect(selected(records, [filter]).map((r) => r.eventID)).toEqual(["id-1"]);
    expect(selected(records, []).map((r) => r.eventID)).toEqual(["id-1", "id-2"]);
    expect(selected(records, [{ eventName: ["REMOVE"] }])).toEqual([]);
  });

  it("describes a batch whose retries ran out to the on-failure destination", () => {
    const mapping = { eventSourceArn: "arn:stream" } as LocalMapping;
    expect(onFailureRecord(mapping, fn, [record("3", "a"), record("9", "b")], "shard-1")).toEqual({
      requestContext: { functionArn: "worker-consumer", condition: "RetryAttemptsExhausted" },
      DDBStreamBatchInfo: {
        shardId: "shard-1",
        startSequenceNumber: "3",
        endSequenceNumber: "9",
        batchSize: 2,
        streamArn: "arn:stream",
      },
    });
  });
});

describe("pipes", () => {
  const message: Message = {
    MessageId: "m1",
    ReceiptHandle: "r1",
    Body: JSON.stringify({ detail: { event_id: "e1", order_key: "conv#1", text: "hi" } }),
    Attributes: { SentTimestamp: "5" },
  };
  const pipe: LocalPipe = {
    logicalId: "Pipe",
    sourceArn: "arn:buffer",
    targetArn: "arn:q.fifo",
    batchSize: 10,
    messageGroupId: "$.body.detail.order_key",
    messageDeduplicationId: "$.body.detail.event_id",
    inputTemplate: "<$.body.detail>",
  };

  it("sees the message with its JSON body parsed, a body that is not JSON as text", () => {
    expect(pipeEvent(message)).toEqual({
      messageId: "m1",
      receiptHandle: "r1",
      body: { detail: { event_id: "e1", order_key: "conv#1", text: "hi" } },
      attributes: { SentTimestamp: "5" },
      eventSource: "aws:sqs",
    });
    expect(pipeEvent({ Body: "plain" }).body).toBe("plain");
  });

  it("sends the templated body with group and dedup ids taken from the event", () => {
    expect(pipeTargetMessage(pipe, pipeEvent(message), "http://q.fifo")).toEqual({
      QueueUrl: "http://q.fifo",
      MessageBody: JSON.stringify({ event_id: "e1", order_key: "conv#1", text: "hi" }),
      MessageGroupId: "conv#1",
      MessageDeduplicationId: "e1",
    });
  });

  it("sends the event itself without a template, literal ids as they are", () => {
    const plain = { ...pipe, inputTemplate: undefined, messageGroupId: "all" };
    const event = pipeEvent(message);
    expect(pipeTargetMessage(plain, event, "http://q.fifo")).toMatchObject({
      MessageBody: JSON.stringify(event),
      MessageGroupId: "all",
    });
    const noIds = { ...plain, messageGroupId: undefined, messageDeduplicationId: undefined };
    expect(pipeTargetMessage(noIds, event, "u")).toEqual({
      QueueUrl: "u",
      MessageBody: JSON.stringify(event),
    });
  });

  it("refuses a message missing the group id path", () => {
    const untemplated = { ...pipe, inputTemplate: undefined };
    expect(() => pipeTargetMessage(untemplated, pipeEvent({ Body: "{}" }), "u")).toThrow(
      /pipe: \$\.body\.detail\.order_key is not in the event/,
    );
  });
});

describe("schedules and handler reports", () => {
  it("invokes a scheduled function with an EventBridge scheduled event", () => {
    const schedule = { logicalId: "Sweep", expression: "rate(1 minute)", functionLogicalIds: [] };
    const now = new Date("2026-01-01T00:00:00.000Z");
    expect(scheduledEvent(schedule, { accountId: "1", region: "us-east-1" }, now)).toEqual({
      version: "0",
      id: `local-${now.getTime()}`,
      "detail-type": "Scheduled Event",
      source: "aws.events",
      account: "1",
      time: "2026-01-01T00:00:00.000Z",
      region: "us-east-1",
      resources: ["Sweep"],
      detail: {},
    });
  });

  it("turns a handler's report into the runtime event of its kind", () => {
    const as = (kind: string) => handlerReport({ ...fn, kind }, "worker", { n: 1 });
    expect(as("relay")).toEqual({ kind: "relayed", report: { n: 1 } });
    expect(as("sweeper")).toEqual({
      kind: "swept",
      function: "worker-consumer",
      report: { n: 1 },
    });
    expect(as("dispatch")).toEqual({ kind: "dispatched", group: "worker", report: { n: 1 } });
  });
});

describe("activity", () => {
  it("is quiet only with nothing in flight, every shard read up and a quiet spell", async () => {
    const activity = new Activity(() => {});
    expect(activity.quiet(10_000)).toBe(false);
    let during = true;
    await activity.track(async () => {
      during = activity.quiet(-1);
    });
    expect(during).toBe(false);
    expect(activity.quiet(-1)).toBe(true);
    activity.streamBehind.add("shard");
    expect(activity.quiet(-1)).toBe(false);
  });

  it("is quiet only once every shard was read up by a read begun after the last activity", async () => {
    const activity = new Activity(() => {});
    activity.shardOpened("stream#shard-1");
    await activity.track(async () => {});
    expect(activity.quiet(-1)).toBe(false);
    // A read begun before the last activity may have missed what it wrote to the stream.
    activity.shardReadUp("stream#shard-1", activity.lastActive - 1);
    expect(activity.quiet(-1)).toBe(false);
    activity.shardReadUp("stream#shard-1", activity.lastActive + 1);
    expect(activity.quiet(-1)).toBe(true);
    activity.shardOpened("stream#shard-2");
    expect(activity.quiet(-1)).toBe(false);
    activity.shardReadUp("stream#shard-2", Infinity);
    expect(activity.quiet(-1)).toBe(true);
    // Something happens after shard 1's read began: it must be read up again.
    await new Promise((resolve) => setTimeout(resolve, 5));
    activity.touch();
    expect(activity.quiet(-1)).toBe(false);
  });

  it("reports a loop that ended with an error, and aborts long polls on stop", async () => {
    const events: RuntimeEvent[] = [];
    const activity = new Activity((e) => events.push(e));
    await activity.reportEnd("fn", Promise.reject(new Error("boom")));
    expect(events).toEqual([
      { kind: "invocation-failed", function: "fn", error: "stopped polling: Error: boom" },
    ]);
    activity.stop();
    expect(activity.stopped).toBe(true);
    expect(activity.signal.aborted).toBe(true);
  });
});
