import {
  type AttributeValue,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type ShardIteratorType,
} from "@aws-sdk/client-dynamodb-streams";
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulator } from "../support/aws";
import { createStreamTable } from "../support/tables";

/**
 * The emulator the local stack runs on (lib/dev/local/moto_launcher.py) keeps DynamoDB transactions
 * atomic the way DynamoDB does: a cancelled TransactWriteItems leaves every item it touched as it
 * was and adds no stream record, and stream iterators opened before it keep hearing later writes
 * (moto alone restores whole-table copies, and the relay's open iterator never sees a record
 * again). Runs against the emulator of the test run (AWS_ENDPOINT_URL or the one it started).
 */
describe("the local emulator's DynamoDB transactions", () => {
  const dynamodb = new DynamoDBClient({ ...emulator(), maxAttempts: 1 });
  const streams = new DynamoDBStreamsClient({ ...emulator(), maxAttempts: 1 });
  const table = `launcher-${ulid().toLowerCase()}`;
  let streamArn = "";
  let shardId = "";

  const key = (pk: string): Record<string, AttributeValue> => ({ pk: { S: pk } });
  const put = (pk: string, v: number) =>
    dynamodb.send(
      new PutItemCommand({ TableName: table, Item: { ...key(pk), v: { N: String(v) } } }),
    );
  const itemOf = async (pk: string) =>
    (
      await dynamodb.send(
        new GetItemCommand({ TableName: table, Key: key(pk), ConsistentRead: true }),
      )
    ).Item;
  const iterator = async (type: ShardIteratorType) =>
    (
      await streams.send(
        new GetShardIteratorCommand({
          StreamArn: streamArn,
          ShardId: shardId,
          ShardIteratorType: type,
        }),
      )
    ).ShardIterator ?? "";
  /** The keys of the records after `it`, and the iterator to read on from. */
  const read = async (it: string) => {
    const page = await streams.send(new GetRecordsCommand({ ShardIterator: it }));
    return {
      keys: (page.Records ?? []).map((r) => r.dynamodb?.Keys?.pk?.S),
      next: page.NextShardIterator ?? "",
    };
  };
  const transact = (items: TransactWriteItem[]) =>
    dynamodb.send(new TransactWriteItemsCommand({ TransactItems: items }));
  const cancelled = async (items: TransactWriteItem[]) => {
    const error = await transact(items).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TransactionCanceledException);
    return (error as TransactionCanceledException).CancellationReasons?.map((r) => r.Code);
  };
  const putIfAbsent = (pk: string): TransactWriteItem => ({
    Put: {
      TableName: table,
      Item: { ...key(pk), v: { N: "0" } },
      ConditionExpression: "attribute_not_exists(pk)",
    },
  });
  const increment = (pk: string): TransactWriteItem => ({
    Update: {
      TableName: table,
      Key: key(pk),
      UpdateExpression: "SET v = v + :one",
      ExpressionAttributeValues: { ":one": { N: "1" } },
    },
  });

  beforeAll(async () => {
    streamArn = await createStreamTable(dynamodb, table);
    const description = await streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
    shardId = description.StreamDescription?.Shards?.[0]?.ShardId ?? "";
  });

  afterAll(async () => {
    await dynamodb.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
    dynamodb.destroy();
    streams.destroy();
  });

  it("an iterator opened before a cancelled transaction hears the writes after it", async () => {
    let it = await iterator("LATEST");
    await put("a", 1);
    const first = await read(it);
    expect(first.keys).toEqual(["a"]);
    it = first.next;

    expect(await cancelled([putIfAbsent("a")])).toEqual(["ConditionalCheckFailed"]);
    await put("b", 1);

    expect((await read(it)).keys).toEqual(["b"]);
  });

  it("a cancelled transaction leaves every item it touched as it was and streams nothing", async () => {
    await put("kept", 1);
    await put("removed", 1);
    await put("taken", 1);
    const it = await iterator("LATEST");
    const before = {
      kept: await itemOf("kept"),
      removed: await itemOf("removed"),
      taken: await itemOf("taken"),
    };

    // The actions ahead of the failing condition are applied by the emulator before it finds
    // the failure: an update in place, a new item, a delete, a put over an existing item.
    const reasons = await cancelled([
      increment("kept"),
      { Put: { TableName: table, Item: { ...key("fresh"), v: { N: "1" } } } },
      { Delete: { TableName: table, Key: key("removed") } },
      { Put: { TableName: table, Item: { ...key("replaced"), v: { N: "1" } } } },
      putIfAbsent("taken"),
    ]);

    expect(reasons).toEqual(["None", "None", "None", "None", "ConditionalCheckFailed"]);
    expect(await itemOf("kept")).toEqual(before.kept);
    expect(await itemOf("removed")).toEqual(before.removed);
    expect(await itemOf("taken")).toEqual(before.taken);
    expect(await itemOf("fresh")).toBeUndefined();
    expect(await itemOf("replaced")).toBeUndefined();
    const after = await read(it);
    expect(after.keys).toEqual([]);
    // And the stream goes on where it was.
    await put("next", 1);
    expect((await read(after.next)).keys).toEqual(["next"]);
  });

  it("a transaction refused as invalid (two actions on one item) leaves nothing behind", async () => {
    const it = await iterator("LATEST");
    const error = await transact([
      { Put: { TableName: table, Item: { ...key("twice"), v: { N: "1" } } } },
      { Put: { TableName: table, Item: { ...key("twice"), v: { N: "2" } } } },
    ]).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.name).toBe("ValidationException");
    expect(await itemOf("twice")).toBeUndefined();
    await put("after-invalid", 1);
    expect((await read(it)).keys).toEqual(["after-invalid"]);
  });

  it("a successful transaction writes every item and streams one record per item", async () => {
    await put("counter", 1);
    const it = await iterator("LATEST");
    await transact([putIfAbsent("created"), increment("counter")]);
    expect(await itemOf("created")).toEqual({ ...key("created"), v: { N: "0" } });
    expect(await itemOf("counter")).toEqual({ ...key("counter"), v: { N: "2" } });
    expect((await read(it)).keys).toEqual(["created", "counter"]);
  });
});

/**
 * SQS long polls on the local emulator wait for a message instead of spinning (moto alone spins
 * while a FIFO group is in flight); what they hand out is unchanged.
 */
describe("the local emulator's SQS long polls", () => {
  const sqs = new SQSClient({ ...emulator(), maxAttempts: 1 });
  let url = "";

  beforeAll(async () => {
    const created = await sqs.send(
      new CreateQueueCommand({
        QueueName: `launcher-${ulid().toLowerCase()}.fifo`,
        Attributes: { FifoQueue: "true" },
      }),
    );
    url = created.QueueUrl ?? "";
  });

  afterAll(async () => {
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
    sqs.destroy();
  });

  it("a poll waiting on an in-flight group gets the group's next message once the first is deleted", async () => {
    for (const [body, id] of [
      ["first", "1"],
      ["second", "2"],
    ])
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: body,
          MessageGroupId: "g",
          MessageDeduplicationId: id,
        }),
      );
    const first = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 1 }));
    expect(first.Messages?.map((m) => m.Body)).toEqual(["first"]);
    const waiting = sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 10 }));
    await new Promise((r) => setTimeout(r, 300));
    await sqs.send(
      new DeleteMessageCommand({
        QueueUrl: url,
        ReceiptHandle: first.Messages?.[0]?.ReceiptHandle,
      }),
    );
    expect((await waiting).Messages?.map((m) => m.Body)).toEqual(["second"]);
  });

  it("a poll on an empty queue returns the message sent while it waits", async () => {
    const waiting = sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 10 }));
    await new Promise((r) => setTimeout(r, 300));
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: "third",
        MessageGroupId: "h",
        MessageDeduplicationId: "3",
      }),
    );
    expect((await waiting).Messages?.map((m) => m.Body)).toEqual(["third"]);
  });
});
