import { DynamoDBClient, GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import {
  DeleteQueueCommand,
  type Message,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventItem, type StateItem, storedStateOf } from "../../functions/adapters/dynamodb/items";
import { streamKey, type TableNames } from "../../functions/adapters/dynamodb/tables";
import { DEAD_LETTER_ATTRIBUTES } from "../../functions/adapters/sqs/dead-letter-sink";
import { CLAIM_ABOVE_BYTES } from "../../functions/core/claim-check";
import { TransientError } from "../../functions/core/errors";
import type { Role } from "../../functions/core/role";
import { type ConsumerOptions, createConsumerHandler } from "../../functions/handlers/consumer";
import {
  isStreamEvent,
  messageOfStreamRecord,
  processStreamBatch,
} from "../../functions/handlers/consumer-stream";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { newUlid, taskEvent, taskStream } from "../support/factories";
import {
  dynamoStreamEvent,
  dynamoStreamRecord,
  sqsEvent,
  sqsRecord,
} from "../support/lambda-events";
import { createQueue } from "../support/queues";
import { createTables, deleteTables } from "../support/tables";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

/** The stream record of an event as the event store writes its item (NEW_IMAGE). */
const recordOf = (envelope: Envelope, sequenceNumber?: string) =>
  dynamoStreamRecord(
    eventItem(envelope, true, true, "events") as unknown as Record<string, unknown>,
    sequenceNumber ? { sequenceNumber } : {},
  );

describe("a stream record as the consumer's message", () => {
  it("carries the stored envelope's JSON, under the record's sequence number", () => {
    const event = taskEvent(1);
    const record = recordOf(event, "4200");
    const message = messageOfStreamRecord(record);
    expect(JSON.parse(message?.body ?? "")).toEqual(event);
    expect(message).toMatchObject({
      messageId: "4200",
      receiptHandle: "",
      eventSource: "aws:dynamodb",
      attributes: { ApproximateReceiveCount: "1" },
    });
  });

  it("carries an event over the bus's size whole, as the store kept it deflated: no claim check", () => {
    const base = taskEvent(1, { type: "task.accepted" });
    const event = { ...base, payload: { title: "q".repeat(CLAIM_ABOVE_BYTES) } };
    const item = eventItem(event as Envelope) as unknown as Record<string, unknown>;
    expect(item.envelope_z).toBeInstanceOf(Uint8Array);
    const body = messageOfStreamRecord(dynamoStreamRecord(item))?.body ?? "";
    expect(Buffer.byteLength(body)).toBeGreaterThan(CLAIM_ABOVE_BYTES);
    expect(JSON.parse(body)).toEqual(event);
  });

  it("is nothing for a MODIFY or REMOVE, and names the problem of an item without an envelope", () => {
    const event = taskEvent(1);
    const item = eventItem(event) as unknown as Record<string, unknown>;
    expect(
      messageOfStreamRecord(dynamoStreamRecord(item, { eventName: "MODIFY" })),
    ).toBeUndefined();
    expect(
      messageOfStreamRecord(dynamoStreamRecord(item, { eventName: "REMOVE" })),
    ).toBeUndefined();
    const { envelope: _, ...bare } = item;
    const body = JSON.parse(messageOfStreamRecord(dynamoStreamRecord(bare))?.body ?? "{}");
    expect(body.problem).toMatch(/no string attribute "envelope"/);
    expect(body.stream_record.keys).toMatchObject({ pk: { S: expect.any(String) } });
  });

  it("tells a stream batch from a queue batch", () => {
    expect(isStreamEvent(dynamoStreamEvent([recordOf(taskEvent(1))]))).toBe(true);
    expect(isStreamEvent(sqsEvent([sqsRecord({ body: "{}" })]))).toBe(false);
  });

  it("stops at the first record left to retry and reports it: Lambda retries from there", async () => {
    const records = taskStream(1, 3).map((e, i) => recordOf(e, String(100 + i)));
    const seen: string[] = [];
    const response = await processStreamBatch(dynamoStreamEvent(records), async (message) => {
      seen.push(message.messageId);
      if (message.messageId === "101") throw new TransientError("test.down", "down");
    });
    expect(seen).toEqual(["100", "101"]);
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: "101" }]);
  });
});

describe("a stream batch's kept writes", () => {
  /** Writes kept by the records after the first, made by `flush` unless it is told to fail. */
  function keptWrites() {
    const kept = {
      keeping: () => kept.held,
      flushes: 0,
      held: false,
      failing: true,
      flush: async () => {
        if (kept.failing) throw new TransientError("test.throttled", "throttled");
        kept.held = false;
        kept.flushes++;
      },
    };
    return kept;
  }
  const records = taskStream(1, 3).map((e, i) => recordOf(e, String(200 + i)));

  it("are made at the end of the batch; when that fails, the batch comes again from the first record kept", async () => {
    const kept = keptWrites();
    const keepAfterFirst = async (message: { messageId: string }) => {
      if (message.messageId !== "200") kept.held = true;
    };
    const failed = await processStreamBatch(dynamoStreamEvent(records), keepAfterFirst, kept);
    expect(failed.batchItemFailures).toEqual([{ itemIdentifier: "201" }]);
    kept.failing = false;
    const made = await processStreamBatch(dynamoStreamEvent(records), keepAfterFirst, kept);
    expect(made.batchItemFailures).toEqual([]);
    expect(kept).toMatchObject({ held: false, flushes: 1 });
  });

  it("are made before a record that failed is reported, or the report starts where they do", async () => {
    const kept = keptWrites();
    const failLast = async (message: { messageId: string }) => {
      if (message.messageId === "202") throw new TransientError("test.down", "down");
      if (message.messageId !== "200") kept.held = true;
    };
    const unmade = await processStreamBatch(dynamoStreamEvent(records), failLast, kept);
    expect(unmade.batchItemFailures).toEqual([{ itemIdentifier: "201" }]);
    kept.failing = false;
    const made = await processStreamBatch(dynamoStreamEvent(records), failLast, kept);
    expect(made.batchItemFailures).toEqual([{ itemIdentifier: "202" }]);
    expect(kept.flushes).toBe(1);
  });
});

describe("createConsumerHandler on the events table's stream (task projection)", () => {
  const suffix = newUlid().toLowerCase();
  let dynamodb: DynamoDBClient;
  let sqs: SQSClient;
  let tables: TableNames;
  let queueUrl: string;
  let deadLetterUrl: string;

  beforeAll(async () => {
    dynamodb = new DynamoDBClient(emulator());
    sqs = new SQSClient(emulator());
    tables = await createTables(dynamodb, `cs-${suffix}`);
    queueUrl = await createQueue(sqs, `cs-group-${suffix}`, false);
    deadLetterUrl = await createQueue(sqs, `cs-group-dlq-${suffix}`, false);
  });

  afterAll(async () => {
    await deleteTables(dynamodb, tables);
    for (const url of [queueUrl, deadLetterUrl])
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    dynamodb.destroy();
    sqs.destroy();
  });

  function consumer(role: Role<TaskView> = taskProjection, options: ConsumerOptions = {}) {
    return createConsumerHandler(role, {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(sqs),
      ...options,
      env: {
        GROUP_NAME: taskProjection.group,
        STATE_TABLE: tables.state,
        EVENTS_TABLE: tables.events,
        INBOX_TABLE: tables.inbox,
        SIDE_EFFECTS_TABLE: tables.sideEffects,
        QUEUE_URL: queueUrl,
        DEAD_LETTER_QUEUE_URL: deadLetterUrl,
        INBOX_TTL_DAYS: "7",
        RETRY_BASE_SECONDS: "2",
        RETRY_MAX_SECONDS: "60",
      },
    });
  }

  async function viewOf(taskId: string): Promise<TaskView | undefined> {
    const { Item } = await dynamodb.send(
      new GetItemCommand({
        TableName: tables.state,
        Key: { pk: { S: streamKey({ type: "task_view", id: taskId }) } },
        ConsistentRead: true,
      }),
    );
    return Item ? (storedStateOf(unmarshall(Item) as StateItem).data as TaskView) : undefined;
  }

  const store = (event: Envelope) =>
    dynamodb.send(
      new PutItemCommand({
        TableName: tables.events,
        Item: marshall(eventItem(event), { removeUndefinedValues: true }),
      }),
    );

  it("folds a batch in order, repairs a version gap from the event store, and a repeat changes nothing", async () => {
    const [v1, v2, v3] = taskStream(1, 3) as [Envelope, Envelope, Envelope];
    for (const e of [v1, v2, v3]) await store(e);
    const outcomes: string[] = [];
    const handler = consumer(taskProjection, {
      observer: { consumed: (r) => outcomes.push(`${r.status} v${r.event.aggregate.version}`) },
    });
    // v2's record is in a batch of its own later (another shard after a split, say): v3 comes first.
    const batch = dynamoStreamEvent([recordOf(v1), recordOf(v3)]);

    expect((await handler(batch)).batchItemFailures).toEqual([]);
    const view = await viewOf(v1.aggregate.id);
    expect(view?.history.map((h) => h.event_id)).toEqual([v1.event_id, v2.event_id, v3.event_id]);

    outcomes.length = 0;
    expect(
      (await handler(dynamoStreamEvent([recordOf(v2), recordOf(v3)]))).batchItemFailures,
    ).toEqual([]);
    expect(outcomes.every((o) => o.startsWith("duplicate"))).toBe(true);
    expect(await viewOf(v1.aggregate.id)).toEqual(view);
  });

  it("writes a view once for a batch's events of its task, as one write per event would leave it", async () => {
    const events = taskStream(1, 4);
    for (const e of events) await store(e);
    const writes: string[] = [];
    const sdk = fromSdk(dynamodb);
    const counting = {
      send: ((command) => {
        if (/Put|Update|Transact/.test(command.operation)) writes.push(command.operation);
        return sdk.send(command);
      }) as typeof sdk.send,
    };
    const handler = consumer(taskProjection, { dynamodb: counting });

    expect(
      (await handler(dynamoStreamEvent(events.map((e) => recordOf(e))))).batchItemFailures,
    ).toEqual([]);

    expect(writes).toEqual(["PutItem"]);
    const view = await viewOf(events[0]?.aggregate.id ?? "");
    expect(view?.history.map((h) => h.event_id)).toEqual(events.map((e) => e.event_id));
  });

  it("dead-letters a record that holds no valid envelope and goes on with the batch", async () => {
    const good = taskEvent(1);
    await store(good);
    const { envelope: _, ...bare } = eventItem(taskEvent(1)) as unknown as Record<string, unknown>;
    const broken = dynamoStreamRecord(bare, { sequenceNumber: "777" });

    const response = await consumer()(dynamoStreamEvent([broken, recordOf(good)]));

    expect(response.batchItemFailures).toEqual([]);
    expect(await viewOf(good.aggregate.id)).toMatchObject({ status: "accepted", version: 1 });
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: deadLetterUrl,
        MaxNumberOfMessages: 10,
        MessageAttributeNames: ["All"],
      }),
    );
    const dead = (Messages ?? []) as Message[];
    expect(dead).toHaveLength(1);
    expect(dead[0]?.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue).toBe(
      "envelope.invalid",
    );
    expect(JSON.parse(dead[0]?.Body ?? "{}").stream_record.sequence_number).toBe("777");
  });

  it("reports the first record that failed transiently, and handles none after it", async () => {
    const [a1, a2] = taskStream(1, 2) as [Envelope, Envelope];
    const b1 = taskEvent(1);
    for (const e of [a1, a2, b1]) await store(e);
    const failing: Role<TaskView> = {
      ...taskProjection,
      decide: (state, event, context) => {
        if (event.event_id === a2.event_id) throw new TransientError("test.unavailable", "down");
        return taskProjection.decide(state, event, context);
      },
    };
    const records = [recordOf(a1, "1"), recordOf(a2, "2"), recordOf(b1, "3")];

    const response = await consumer(failing)(dynamoStreamEvent(records));

    expect(response.batchItemFailures).toEqual([{ itemIdentifier: "2" }]);
    expect(await viewOf(a1.aggregate.id)).toMatchObject({ version: 1 });
    expect(await viewOf(b1.aggregate.id)).toBeUndefined();
  });
});
