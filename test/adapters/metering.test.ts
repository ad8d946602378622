import {
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import {
  QueryCommand as DocumentQueryCommand,
  DynamoDBDocumentClient,
  PutCommand,
} from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { indexCatalog } from "../../lib/dev/metering/index-writes";
import { inMeterScope, itemSize, meter } from "../../lib/dev/metering/metering";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { createTables, deleteTables } from "../support/tables";

let admin: DynamoDBClient;
let tables: TableNames;

beforeAll(async () => {
  admin = new DynamoDBClient(emulator());
  tables = await createTables(admin, `meter-${newUlid().toLowerCase()}`);
});

afterAll(async () => {
  await deleteTables(admin, tables);
  admin.destroy();
});

describe("itemSize", () => {
  it("adds attribute names and value sizes the DynamoDB way", () => {
    expect(itemSize({ pk: { S: "abc" } })).toBe(5);
    expect(itemSize({ n: { N: "12345" } })).toBe(1 + 4);
    expect(itemSize({ b: { BOOL: true }, z: { NULL: true } })).toBe(4);
    expect(itemSize({ m: { M: { k: { S: "v" } } } })).toBe(1 + 3 + 1 + 1 + 1);
    expect(itemSize({ l: { L: [{ S: "ab" }, { N: "1" }] } })).toBe(1 + 3 + (1 + 2) + (1 + 2));
    expect(itemSize({ s: { S: "é" } })).toBe(3);
    // Plain items (as a DocumentClient returns them) are sized through their marshalled form.
    expect(itemSize({ pk: "abc" })).toBe(5);
  });
});

describe("meter", () => {
  it("counts calls per operation and estimates write and read units", async () => {
    const client = new DynamoDBClient(emulator());
    const m = meter(client);
    expect(meter(client)).toBe(m);
    const table = tables.state;
    // "pk" + "big-item#1" + "blob" + 3000 bytes = 3016 bytes: 3 write units.
    await client.send(
      new PutItemCommand({
        TableName: table,
        Item: { pk: { S: "big-item#1" }, blob: { S: "x".repeat(3000) } },
      }),
    );
    expect(m.snapshot()).toMatchObject({
      calls: { PutItem: 1 },
      writeUnits: 3,
      readUnits: 0,
      indexWriteUnits: 0,
    });

    // A transaction counts twice per item: 2 small puts = 4.
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: table, Item: { pk: { S: "small#1" } } } },
          { Put: { TableName: table, Item: { pk: { S: "small#2" } } } },
        ],
      }),
    );
    expect(m.snapshot().writeUnits).toBe(7);

    // A failed conditional write is billed too.
    await expect(
      client.send(
        new PutItemCommand({
          TableName: table,
          Item: { pk: { S: "small#1" } },
          ConditionExpression: "attribute_not_exists(pk)",
        }),
      ),
    ).rejects.toThrow();
    expect(m.snapshot().writeUnits).toBe(8);

    // Reads: 3 KB consistent = 1, eventually consistent = 0.5.
    const key = { pk: { S: "big-item#1" } };
    await client.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }));
    await client.send(new GetItemCommand({ TableName: table, Key: key }));
    expect(m.snapshot().readUnits).toBe(1.5);

    expect(m.snapshot().calls).toEqual({ PutItem: 2, TransactWriteItems: 1, GetItem: 2 });
    m.reset();
    expect(m.snapshot()).toEqual({
      calls: {},
      writeUnits: 0,
      readUnits: 0,
      indexWriteUnits: 0,
      billed: {},
      emptyReceives: 0,
      queues: {},
    });
    client.destroy();
  });

  it("sizes DocumentClient items like low-level ones (shared middleware stack)", async () => {
    const client = new DynamoDBClient(emulator());
    const documents = DynamoDBDocumentClient.from(client);
    const m = meter(documents);
    expect(meter(client)).toBe(m);
    await documents.send(
      new PutCommand({ TableName: tables.state, Item: { pk: "doc#1", blob: "y".repeat(2500) } }),
    );
    expect(m.snapshot()).toMatchObject({
      calls: { PutItem: 1 },
      writeUnits: 3,
      readUnits: 0,
      indexWriteUnits: 0,
    });
    await documents.send(
      new DocumentQueryCommand({
        TableName: tables.state,
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": "doc#1" },
        ConsistentRead: true,
      }),
    );
    expect(m.snapshot().readUnits).toBe(1);
    client.destroy();
  });

  it("adds the index writes of the tables it is given the layouts of", async () => {
    const client = new DynamoDBClient(emulator());
    const m = meter(client, { indexes: indexCatalog(tables) });
    const row = {
      pk: { S: "inbox#audit#01J0000000000000000000001" },
      correlation_id: { S: "corr_1" },
      task_id: { S: "task_1" },
    };
    // One small row in a transaction: 2 for the table, 1 for each of the two indexes.
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [{ Put: { TableName: tables.inbox, Item: row } }],
      }),
    );
    expect(m.snapshot()).toMatchObject({ writeUnits: 4, indexWriteUnits: 2 });
    // A failed condition writes no index entry: the table's unit alone.
    await expect(
      client.send(
        new PutItemCommand({
          TableName: tables.inbox,
          Item: row,
          ConditionExpression: "attribute_not_exists(pk)",
        }),
      ),
    ).rejects.toThrow();
    expect(m.snapshot()).toMatchObject({ writeUnits: 5, indexWriteUnits: 2 });
    client.destroy();
  });

  it("bills an update for the whole item, the larger of before and after, not its request", async () => {
    const client = new DynamoDBClient(emulator());
    const m = meter(client);
    const table = tables.state;
    const key = { pk: { S: "grown#1" } };
    await client.send(
      new PutItemCommand({ TableName: table, Item: { ...key, payload: { S: "x".repeat(2500) } } }),
    );
    m.reset();
    // A 3-byte attribute added to a 2.5 KB item: 3 units, not the request's 1.
    const small = (n: number) => ({
      TableName: table,
      Key: key,
      UpdateExpression: "SET tag = :tag",
      ExpressionAttributeValues: { ":tag": { S: `t${n}` } },
    });
    await client.send(new UpdateItemCommand(small(1)));
    expect(m.snapshot().writeUnits).toBe(3);
    // Shrunk to nothing: billed at its size before.
    await client.send(
      new UpdateItemCommand({ TableName: table, Key: key, UpdateExpression: "REMOVE payload" }),
    );
    expect(m.snapshot().writeUnits).toBe(6);
    // In a transaction, twice the item's size.
    await client.send(
      new PutItemCommand({ TableName: table, Item: { ...key, payload: { S: "y".repeat(1500) } } }),
    );
    m.reset();
    await client.send(new TransactWriteItemsCommand({ TransactItems: [{ Update: small(2) }] }));
    expect(m.snapshot()).toMatchObject({ writeUnits: 4, calls: { TransactWriteItems: 1 } });
    client.destroy();
  });

  it("uses ConsumedCapacity when the caller asked for it (moto reports 1 whatever the size)", async () => {
    const client = new DynamoDBClient(emulator());
    const m = meter(client);
    await client.send(
      new PutItemCommand({
        TableName: tables.state,
        Item: { pk: { S: "reported#1" }, blob: { S: "z".repeat(5000) } },
        ReturnConsumedCapacity: "TOTAL",
      }),
    );
    expect(m.snapshot().writeUnits).toBe(1);
    await client.send(
      new QueryCommand({
        TableName: tables.state,
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": { S: "reported#1" } },
        ReturnConsumedCapacity: "TOTAL",
      }),
    );
    expect(m.snapshot().readUnits).toBeGreaterThan(0);
    client.destroy();
  });

  it("counts calls of any SDK client", async () => {
    const sqs = new SQSClient(emulator());
    const m = meter(sqs);
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({
        QueueName: `meter-${newUlid().toLowerCase()}`,
      }),
    );
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "a" }));
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "b" }));
    expect(m.snapshot()).toEqual({
      calls: { CreateQueue: 1, SendMessage: 2 },
      writeUnits: 0,
      readUnits: 0,
      indexWriteUnits: 0,
      billed: { CreateQueue: 1, SendMessage: 2 },
      emptyReceives: 0,
      queues: { [QueueUrl ?? ""]: { requests: 2, emptyReceives: 0, sent: 2, firstReceived: 0 } },
    });
    sqs.destroy();
  });

  it("keeps each write with its scope, items and units when asked to (recordWrites)", async () => {
    const client = new DynamoDBClient(emulator());
    const m = meter(client, { indexes: indexCatalog(tables), recordWrites: true });
    const id = newUlid();
    await inMeterScope("orchestrator", () =>
      client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: tables.state, Item: { pk: { S: `dag_run#${id}` } } } },
            {
              Put: {
                TableName: tables.events,
                Item: {
                  pk: { S: `dag_run#${id}` },
                  version: { N: "1" },
                  blob: { S: "x".repeat(1500) },
                },
              },
            },
          ],
        }),
      ),
    );
    const taken = client.send(
      new PutItemCommand({
        TableName: tables.state,
        Item: { pk: { S: `dag_run#${id}` } },
        ConditionExpression: "attribute_not_exists(pk)",
      }),
    );
    await expect(taken).rejects.toThrow();
    const [committed, refused, ...rest] = m.writes();
    expect(rest).toEqual([]);
    expect(committed).toMatchObject({
      scope: "orchestrator",
      operation: "TransactWriteItems",
      items: [
        { table: tables.state, key: `dag_run#${id}` },
        { table: tables.events, key: `dag_run#${id}` },
      ],
      // 2 for the state item, 4 for the 1.5 KB event, in a transaction.
      writeUnits: 6 + (committed?.indexWriteUnits ?? 0),
    });
    expect(committed?.items[1]?.bytes).toBeGreaterThan(1500);
    expect(refused).toMatchObject({ scope: undefined, operation: "PutItem", failed: true });
    expect(refused?.writeUnits).toBe(1);
    m.reset();
    expect(m.writes()).toEqual([]);
    client.destroy();
  });

  it("counts the calls made inside a scope apart, and every call in the total", async () => {
    const sqs = new SQSClient(emulator());
    const m = meter(sqs);
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({ QueueName: `meter-${newUlid().toLowerCase()}` }),
    );
    const send = (body: string) =>
      sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: body }));
    await Promise.all([
      inMeterScope("router", async () => {
        await send("a");
        await send("b");
      }),
      inMeterScope("sender", () => send("c")),
    ]);
    expect(m.byScope()).toMatchObject({
      router: { calls: { SendMessage: 2 }, writeUnits: 0, readUnits: 0, indexWriteUnits: 0 },
      sender: { calls: { SendMessage: 1 }, writeUnits: 0, readUnits: 0, indexWriteUnits: 0 },
    });
    expect(m.byScope().router?.queues[QueueUrl ?? ""]?.sent).toBe(2);
    expect(m.snapshot().calls).toEqual({ CreateQueue: 1, SendMessage: 3 });
    m.reset();
    expect(m.byScope()).toEqual({});
    sqs.destroy();
  });

  it("counts SQS requests as billed, with what each queue was sent and first handed out", async () => {
    const sqs = new SQSClient(emulator());
    const m = meter(sqs);
    const { QueueUrl = "" } = await sqs.send(
      new CreateQueueCommand({ QueueName: `meter-${newUlid().toLowerCase()}` }),
    );
    m.reset();
    await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl,
        Entries: ["a", "b", "c"].map((body, i) => ({ Id: String(i), MessageBody: body })),
      }),
    );
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl,
        MaxNumberOfMessages: 10,
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
    );
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl,
        Entries: Messages.map((msg, i) => ({ Id: String(i), ReceiptHandle: msg.ReceiptHandle })),
      }),
    );
    await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 0 }));
    const snapshot = m.snapshot();
    expect(snapshot.billed).toEqual({
      SendMessageBatch: 1,
      ReceiveMessage: 2,
      DeleteMessageBatch: 1,
    });
    expect(snapshot.emptyReceives).toBe(1);
    expect(snapshot.queues[QueueUrl]).toEqual({
      requests: 4,
      emptyReceives: 1,
      sent: 3,
      firstReceived: Messages.length,
    });
    expect(Messages.length).toBe(3);
    sqs.destroy();
  });

  it("counts a call in the period it ends in: a long poll begun before a reset, answered after it", async () => {
    const sqs = new SQSClient(emulator());
    const m = meter(sqs);
    const { QueueUrl = "" } = await sqs.send(
      new CreateQueueCommand({ QueueName: `meter-${newUlid().toLowerCase()}` }),
    );
    // A poller waiting on an idle queue when the metered play begins, as the local runtime's do.
    const polling = inMeterScope("poller", () =>
      sqs.send(
        new ReceiveMessageCommand({
          QueueUrl,
          WaitTimeSeconds: 10,
          MessageSystemAttributeNames: ["ApproximateReceiveCount"],
        }),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    m.reset();
    await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "the play's first message" }));
    const { Messages = [] } = await polling;
    expect(Messages).toHaveLength(1);
    const received = { requests: 1, emptyReceives: 0, sent: 0, firstReceived: 1 };
    expect(m.snapshot().calls).toEqual({ SendMessage: 1, ReceiveMessage: 1 });
    expect(m.snapshot().queues[QueueUrl]).toEqual({
      requests: 2,
      emptyReceives: 0,
      sent: 1,
      firstReceived: 1,
    });
    expect(m.byScope().poller?.queues[QueueUrl]).toEqual(received);
    sqs.destroy();
  });

  it("counts EventBridge PutEvents as the events it publishes", async () => {
    const events = new EventBridgeClient(emulator());
    const m = meter(events);
    const entry = { Source: "meter.test", DetailType: "t", Detail: JSON.stringify({ n: 1 }) };
    await events.send(new PutEventsCommand({ Entries: [entry, entry, entry] }));
    expect(m.snapshot().calls).toEqual({ PutEvents: 1 });
    expect(m.snapshot().billed).toEqual({ PutEvents: 3 });
    events.destroy();
  });
});
