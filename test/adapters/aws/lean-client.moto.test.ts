import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  EventBridgeClient,
} from "@aws-sdk/client-eventbridge";
import {
  CreateTopicCommand,
  DeleteTopicCommand,
  PublishCommand,
  SNSClient,
} from "@aws-sdk/client-sns";
import {
  ChangeMessageVisibilityCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeanAwsClient } from "../../../functions/adapters/aws/lean-client";
import {
  BatchGetItem,
  ChangeMessageVisibility,
  GetItem,
  GetQueueAttributes,
  Publish,
  PutEvents,
  PutItem,
  Query,
  SendMessageBatch,
  TransactWriteItems,
  UpdateItem,
} from "../../../functions/adapters/aws/operations";
import { emulator } from "../../support/aws";
import { newUlid } from "../../support/factories";
import { createQueue } from "../../support/queues";

/**
 * The lean client against the emulator, each operation the functions call, next to the SDK
 * client doing the same: what comes back (outputs, binary attributes, error names and fields)
 * must be what the SDK gives.
 */

const suffix = newUlid().toLowerCase();
const table = `lean-${suffix}`;
let lean: LeanAwsClient;
let dynamodb: DynamoDBClient;
let sqs: SQSClient;
let sns: SNSClient;
let eventbridge: EventBridgeClient;
let queueUrl: string;

async function failure(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (error) {
    return error as Error & Record<string, unknown>;
  }
  throw new Error("expected the call to fail");
}

beforeAll(async () => {
  lean = new LeanAwsClient({ ...emulator(), maxAttempts: 1 });
  dynamodb = new DynamoDBClient({ ...emulator(), maxAttempts: 1 });
  sqs = new SQSClient({ ...emulator(), maxAttempts: 1 });
  sns = new SNSClient({ ...emulator(), maxAttempts: 1 });
  eventbridge = new EventBridgeClient({ ...emulator(), maxAttempts: 1 });
  await dynamodb.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "pk", AttributeType: "S" },
        { AttributeName: "sk", AttributeType: "N" },
      ],
      KeySchema: [
        { AttributeName: "pk", KeyType: "HASH" },
        { AttributeName: "sk", KeyType: "RANGE" },
      ],
    }),
  );
  queueUrl = await createQueue(sqs, `lean-${suffix}`, true);
});

afterAll(async () => {
  await dynamodb.send(new DeleteTableCommand({ TableName: table }));
  await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  for (const client of [dynamodb, sqs, sns, eventbridge]) client.destroy();
});

const bytes = new Uint8Array([0, 1, 2, 250, 255]);
const item = {
  pk: { S: "a" },
  sk: { N: "1" },
  blob: { B: bytes },
  blobs: { BS: [bytes, new Uint8Array([7])] },
  nested: { M: { B: { S: "a member named B" }, list: { L: [{ N: "2" }, { BOOL: true }] } } },
  nothing: { NULL: true },
  text: { S: "héllo ✓" },
};

describe("LeanAwsClient on DynamoDB", () => {
  it("writes and reads items as the SDK does, binary attributes as bytes", async () => {
    const put = await lean.send(PutItem({ TableName: table, Item: item }));
    expect(put.$metadata).toMatchObject({ httpStatusCode: 200, attempts: 1 });
    const key = { pk: { S: "a" }, sk: { N: "1" } };
    const mine = await lean.send(GetItem({ TableName: table, Key: key, ConsistentRead: true }));
    const theirs = await dynamodb.send(new GetItemCommand({ TableName: table, Key: key }));
    expect(mine.Item).toEqual(theirs.Item);
    expect(mine.Item?.blob?.B).toBeInstanceOf(Uint8Array);
    expect([...(mine.Item?.blob?.B ?? [])]).toEqual([...bytes]);
  });

  it("reads back what the SDK wrote, and the other way round", async () => {
    const key = { pk: { S: "b" }, sk: { N: "2" } };
    await dynamodb.send(new PutItemCommand({ TableName: table, Item: { ...item, ...key } }));
    const got = await lean.send(GetItem({ TableName: table, Key: key }));
    expect(got.Item).toEqual({ ...item, ...key });
  });

  it("queries, batch-gets and updates", async () => {
    for (const sk of ["10", "11", "12"])
      await lean.send(PutItem({ TableName: table, Item: { pk: { S: "q" }, sk: { N: sk } } }));
    const page = await lean.send(
      Query({
        TableName: table,
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": { S: "q" } },
        Limit: 2,
      }),
    );
    expect(page.Items?.map((i) => i.sk?.N)).toEqual(["10", "11"]);
    expect(page.LastEvaluatedKey).toEqual({ pk: { S: "q" }, sk: { N: "11" } });
    const batch = await lean.send(
      BatchGetItem({
        RequestItems: { [table]: { Keys: [{ pk: { S: "q" }, sk: { N: "12" } }] } },
      }),
    );
    expect(batch.Responses?.[table]).toEqual([{ pk: { S: "q" }, sk: { N: "12" } }]);
    const updated = await lean.send(
      UpdateItem({
        TableName: table,
        Key: { pk: { S: "q" }, sk: { N: "12" } },
        UpdateExpression: "SET n = :n",
        ExpressionAttributeValues: { ":n": { N: "5" } },
        ReturnValues: "ALL_NEW",
      }),
    );
    expect(updated.Attributes?.n).toEqual({ N: "5" });
  });

  it("refuses a failed condition with the SDK's error name and the item it returned", async () => {
    const key = { pk: { S: "c" }, sk: { N: "3" } };
    await lean.send(PutItem({ TableName: table, Item: { ...key, blob: { B: bytes } } }));
    const conditional = {
      TableName: table,
      Item: key,
      ConditionExpression: "attribute_not_exists(pk)",
      ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
    };
    const mine = await failure(lean.send(PutItem(conditional)));
    const theirs = await failure(dynamodb.send(new PutItemCommand(conditional)));
    expect(mine).toBeInstanceOf(Error);
    expect(mine.name).toBe(theirs.name);
    expect(mine.name).toBe("ConditionalCheckFailedException");
    expect(mine.$fault).toBe("client");
    expect(mine.$metadata).toMatchObject({ httpStatusCode: 400, attempts: 1 });
    expect(mine.Item).toEqual(theirs.Item);
  });

  it("cancels a transaction with the SDK's reasons, index by index", async () => {
    const key = { pk: { S: "d" }, sk: { N: "4" } };
    await lean.send(PutItem({ TableName: table, Item: key }));
    const input = {
      TransactItems: [
        { Put: { TableName: table, Item: { pk: { S: "d" }, sk: { N: "5" } } } },
        {
          Put: {
            TableName: table,
            Item: key,
            ConditionExpression: "attribute_not_exists(pk)",
          },
        },
      ],
    };
    const mine = await failure(lean.send(TransactWriteItems(input)));
    expect(mine.name).toBe("TransactionCanceledException");
    expect((mine.CancellationReasons as { Code?: string }[]).map((r) => r.Code)).toEqual([
      "None",
      "ConditionalCheckFailed",
    ]);
  });

  it("names a missing table as the SDK does", async () => {
    const input = { TableName: `${table}-absent`, Key: { pk: { S: "x" }, sk: { N: "1" } } };
    const mine = await failure(lean.send(GetItem(input)));
    const theirs = await failure(dynamodb.send(new GetItemCommand(input)));
    expect(mine.name).toBe(theirs.name);
    expect(mine.message).toBe(theirs.message);
  });
});

describe("LeanAwsClient on SQS, EventBridge and SNS", () => {
  it("sends a FIFO batch and reads queue attributes", async () => {
    const sent = await lean.send(
      SendMessageBatch({
        QueueUrl: queueUrl,
        Entries: [
          { Id: "1", MessageBody: "one", MessageGroupId: "g", MessageDeduplicationId: "d1" },
          { Id: "2", MessageBody: "two", MessageGroupId: "g", MessageDeduplicationId: "d2" },
        ],
      }),
    );
    expect(sent.Successful?.map((s) => s.Id)).toEqual(["1", "2"]);
    const { Attributes } = await lean.send(
      GetQueueAttributes({ QueueUrl: queueUrl, AttributeNames: ["FifoQueue"] }),
    );
    expect(Attributes?.FifoQueue).toBe("true");
    const received = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }),
    );
    expect(received.Messages?.map((m) => m.Body)).toEqual(["one", "two"]);
  });

  it("names a refused receipt handle as the SDK does", async () => {
    const input = { QueueUrl: queueUrl, ReceiptHandle: "not-a-handle", VisibilityTimeout: 5 };
    const mine = await failure(lean.send(ChangeMessageVisibility(input)));
    const theirs = await failure(sqs.send(new ChangeMessageVisibilityCommand(input)));
    expect(mine.name).toBe(theirs.name);
  });

  it("puts events with their time", async () => {
    const bus = `lean-${suffix}`;
    await eventbridge.send(new CreateEventBusCommand({ Name: bus }));
    try {
      const output = await lean.send(
        PutEvents({
          Entries: [
            {
              EventBusName: bus,
              Source: "agentbus",
              DetailType: "t",
              Detail: JSON.stringify({ a: 1 }),
              Time: new Date("2026-01-02T03:04:05Z"),
            },
          ],
        }),
      );
      expect(output.FailedEntryCount).toBe(0);
      expect(output.Entries?.[0]?.EventId).toEqual(expect.any(String));
    } finally {
      await eventbridge.send(new DeleteEventBusCommand({ Name: bus }));
    }
  });

  it("publishes to a FIFO topic with attributes, and names a missing topic as the SDK does", async () => {
    const { TopicArn } = await sns.send(
      new CreateTopicCommand({
        Name: `lean-${suffix}.fifo`,
        Attributes: { FifoTopic: "true" },
      }),
    );
    try {
      const input = {
        TopicArn,
        Message: 'a & b <c> "d"',
        MessageGroupId: "conversation-1",
        MessageDeduplicationId: "dedup-1",
        MessageAttributes: {
          idempotency_key: { DataType: "String", StringValue: "k 1" },
          recipient: { DataType: "String", StringValue: "r@example.com" },
        },
      };
      const published = await lean.send(Publish(input));
      expect(published.MessageId).toEqual(expect.any(String));
      expect(published.$metadata.httpStatusCode).toBe(200);
      const missing = { ...input, TopicArn: `${TopicArn}-absent.fifo` };
      const mine = await failure(lean.send(Publish(missing)));
      const theirs = await failure(sns.send(new PublishCommand(missing)));
      expect(mine.name).toBe(theirs.name);
      expect(mine.message).toBe(theirs.message);
    } finally {
      await sns.send(new DeleteTopicCommand({ TopicArn }));
    }
  });
});
