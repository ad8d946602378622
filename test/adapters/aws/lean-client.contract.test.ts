import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  EventBridgeClient,
} from "@aws-sdk/client-eventbridge";
import { CreateKeyCommand, EncryptCommand, KMSClient } from "@aws-sdk/client-kms";
import { CreateTopicCommand, DeleteTopicCommand, SNSClient } from "@aws-sdk/client-sns";
import {
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AwsClient, AwsCommand, AwsService } from "../../../functions/adapters/aws/client";
import { LeanAwsClient } from "../../../functions/adapters/aws/lean-client";
import * as operations from "../../../functions/adapters/aws/operations";
import {
  BatchGetItem,
  ChangeMessageVisibility,
  ChangeMessageVisibilityBatch,
  Converse,
  Decrypt,
  GenerateDataKey,
  GetItem,
  GetQueueAttributes,
  Publish,
  PutEvents,
  PutItem,
  Query,
  SendMessage,
  SendMessageBatch,
  TransactWriteItems,
  UpdateItem,
} from "../../../functions/adapters/aws/operations";
import { fromSdk } from "../../../lib/operator/from-sdk";
import { emulator } from "../../support/aws";
import { AwsFaultStub, type StubAnswer } from "../../support/aws-fault-stub";
import { newUlid } from "../../support/factories";
import { createQueue } from "../../support/queues";
import { SDK_CLIENTS } from "../../support/sdk-clients";

/**
 * The contract of the functions' AWS client: every operation in operations.ts, sent through the
 * lean client and through the AWS SDK v3 client of its service, must come back the same, in
 * success (against moto) and in refusal (moto's conditional failures and cancelled transactions;
 * a loopback stub for what moto cannot produce: throttling and server faults in each service's
 * own error shape, and Bedrock Runtime, which moto does not emulate).
 */

const OPERATIONS = Object.values(operations);

type Side = "lean" | "sdk";
type Clients = Record<Side, AwsClient>;
const suffix = newUlid().toLowerCase();
const table = `contract-${suffix}`;
const sdkClients: { destroy(): void }[] = [];

/** The lean client and the SDK clients behind one port, all at `endpoint`, attempts as given. */
function clientsAt(endpoint: string, maxAttempts: number): Clients {
  const config = { ...emulator(), endpoint, maxAttempts };
  const byService = new Map<AwsService, AwsClient>();
  for (const [service, Client] of Object.entries(SDK_CLIENTS)) {
    // Bedrock Runtime's client speaks HTTP/2 by default (for its streams), the stub HTTP/1.1.
    const client = new Client({ ...config, requestHandler: new NodeHttpHandler() });
    sdkClients.push(client);
    byService.set(service as AwsService, fromSdk(client));
  }
  return {
    lean: new LeanAwsClient(config),
    sdk: {
      send: (command) => {
        const client = byService.get(command.service);
        if (!client) throw new Error(`no SDK client for ${command.service}`);
        return client.send(command);
      },
    },
  };
}

/** What a call's outcome is, compared across the clients: output, or error with its fields. */
async function outcome(client: AwsClient, command: AwsCommand): Promise<Record<string, unknown>> {
  try {
    const { $metadata, ...output } = await client.send(command);
    return { output, status: $metadata.httpStatusCode, attempts: $metadata.attempts };
  } catch (caught) {
    const error = caught as Error & Record<string, unknown>;
    if (!(error instanceof Error)) throw caught;
    const $metadata = error.$metadata as { httpStatusCode?: number; attempts?: number };
    return {
      error: error.name,
      message: error.message,
      fault: error.$fault,
      fields: errorFields(error),
      status: $metadata?.httpStatusCode,
      attempts: $metadata?.attempts,
    };
  }
}

/**
 * An error's own fields (`Item`, `CancellationReasons`, ...), without what only says how the
 * client read it: the SDK's query-compatibility copies (`Code`, `Type`, `Error`), its request id
 * copy, the XML namespace its query protocol reads as a field (`xmlns`) and its `$`-fields, which
 * the outcome compares separately.
 */
function errorFields(error: Record<string, unknown>): Record<string, unknown> {
  const skip = new Set([
    "name",
    "message",
    "stack",
    "Code",
    "Type",
    "Error",
    "RequestId",
    "__type",
    "xmlns",
  ]);
  return Object.fromEntries(
    Object.entries(error).filter(([key]) => !skip.has(key) && !key.startsWith("$")),
  );
}

/** A call's outcome with the values no two calls share (ids, digests of ids) masked. */
function masked(value: unknown, keys: readonly string[]): unknown {
  if (Array.isArray(value)) return value.map((v) => masked(v, keys));
  if (value instanceof Uint8Array || !value || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, keys.includes(k) ? typeof v : masked(v, keys)]),
  );
}

/** One operation's contract case: the command each side sends, and the values to mask. */
interface Case {
  readonly name: string;
  readonly command: (side: Side) => AwsCommand | Promise<AwsCommand>;
  readonly mask?: readonly string[];
}

let moto: Clients;
let sdkDynamo: DynamoDBClient;
let sdkSqs: SQSClient;
let queueUrl: string;
let topicArn: string | undefined;
let sdkKms: KMSClient;
let keyArn: string;
const bus = `contract-${suffix}`;

beforeAll(async () => {
  moto = clientsAt(emulator().endpoint, 1);
  sdkDynamo = new DynamoDBClient({ ...emulator(), maxAttempts: 1 });
  sdkSqs = new SQSClient({ ...emulator(), maxAttempts: 1 });
  sdkClients.push(sdkDynamo, sdkSqs);
  await sdkDynamo.send(
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
  queueUrl = await createQueue(sdkSqs, `contract-${suffix}`, true);
  const eventbridge = new EventBridgeClient({ ...emulator(), maxAttempts: 1 });
  const sns = new SNSClient({ ...emulator(), maxAttempts: 1 });
  sdkClients.push(eventbridge, sns);
  await eventbridge.send(new CreateEventBusCommand({ Name: bus }));
  ({ TopicArn: topicArn } = await sns.send(
    new CreateTopicCommand({ Name: `contract-${suffix}.fifo`, Attributes: { FifoTopic: "true" } }),
  ));
  sdkKms = new KMSClient({ ...emulator(), maxAttempts: 1 });
  sdkClients.push(sdkKms);
  const { KeyMetadata } = await sdkKms.send(new CreateKeyCommand({ Description: table }));
  keyArn = KeyMetadata?.Arn ?? "";
});

afterAll(async () => {
  await sdkDynamo?.send(new DeleteTableCommand({ TableName: table }));
  await sdkSqs?.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  await new EventBridgeClient({ ...emulator() }).send(new DeleteEventBusCommand({ Name: bus }));
  await new SNSClient({ ...emulator() }).send(new DeleteTopicCommand({ TopicArn: topicArn }));
  for (const client of sdkClients) client.destroy();
});

const bytes = new Uint8Array([0, 1, 2, 250, 255]);
const attributes = {
  blob: { B: bytes },
  blobs: { BS: [bytes, new Uint8Array([7])] },
  nested: { M: { B: { S: "a member named B" }, list: { L: [{ N: "2" }, { BOOL: true }] } } },
  nothing: { NULL: true },
  text: { S: "héllo ✓" },
  numbers: { NS: ["1", "2.5"] },
};
const key = (side: Side, name: string, sk = 1) => ({
  pk: { S: `${name}-${side}` },
  sk: { N: `${sk}` },
});

/** Puts an item through the SDK, for a case to read, update or collide with. */
async function seed(side: Side, name: string, sk = 1): Promise<void> {
  await sdkDynamo.send(
    new PutItemCommand({ TableName: table, Item: { ...key(side, name, sk), ...attributes } }),
  );
}

/** A message on the queue, received: its receipt handle. */
async function receivedHandle(side: Side, name: string): Promise<string> {
  await sdkSqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: `${name}-${side}`,
      MessageGroupId: `${name}-${side}`,
      MessageDeduplicationId: `${name}-${side}`,
    }),
  );
  const { Messages } = await sdkSqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 1,
      VisibilityTimeout: 30,
    }),
  );
  const handle = Messages?.[0]?.ReceiptHandle;
  if (!handle) throw new Error("no message received");
  return handle;
}

const conditionFailed = {
  ConditionExpression: "attribute_not_exists(pk)",
  ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
};

const context = { tenant_id: "t-1", customer_id: "c-1" };
const secret = new Uint8Array(32).map((_, i) => (i * 37) % 256);

/** `secret` encrypted under the test's key (through the SDK), as a data key is wrapped. */
async function wrappedSecret(): Promise<Uint8Array> {
  const { CiphertextBlob } = await sdkKms.send(
    new EncryptCommand({ KeyId: keyArn, Plaintext: secret, EncryptionContext: context }),
  );
  if (!CiphertextBlob) throw new Error("Encrypt gave no ciphertext");
  return CiphertextBlob;
}

/** Every operation against moto, answered or refused. */
const MOTO_CASES: readonly Case[] = [
  {
    name: "GetItem",
    command: async () => {
      await seed("sdk", "get");
      return GetItem({ TableName: table, Key: key("sdk", "get"), ConsistentRead: true });
    },
  },
  {
    name: "GetItem of a missing table",
    command: () => GetItem({ TableName: `${table}-absent`, Key: key("sdk", "x") }),
  },
  {
    name: "BatchGetItem",
    command: async () => {
      await seed("sdk", "batch");
      return BatchGetItem({
        RequestItems: { [table]: { Keys: [key("sdk", "batch"), key("sdk", "batch", 2)] } },
      });
    },
  },
  {
    name: "PutItem returning the old item",
    command: async (side) => {
      await seed(side, "put");
      const Item = { ...key(side, "put"), text: { S: "new" } };
      return PutItem({ TableName: table, Item, ReturnValues: "ALL_OLD" });
    },
    mask: ["S"],
  },
  {
    name: "PutItem refused by its condition, with the item",
    command: async (side) => {
      await seed(side, "put-cond");
      return PutItem({ TableName: table, Item: key(side, "put-cond"), ...conditionFailed });
    },
    mask: ["S"],
  },
  {
    name: "UpdateItem",
    command: async (side) => {
      await seed(side, "update");
      return UpdateItem({
        TableName: table,
        Key: key(side, "update"),
        UpdateExpression: "SET n = :n REMOVE nothing",
        ExpressionAttributeValues: { ":n": { N: "5" } },
        ReturnValues: "ALL_NEW",
      });
    },
    mask: ["S"],
  },
  {
    name: "UpdateItem refused by its condition, with the item",
    command: async (side) => {
      await seed(side, "update-cond");
      return UpdateItem({
        TableName: table,
        Key: key(side, "update-cond"),
        UpdateExpression: "SET n = :n",
        ExpressionAttributeValues: { ":n": { N: "5" } },
        ...conditionFailed,
      });
    },
    mask: ["S"],
  },
  {
    name: "Query, a page of it",
    command: async (side) => {
      for (const sk of [1, 2, 3]) await seed(side, "query", sk);
      return Query({
        TableName: table,
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": { S: `query-${side}` } },
        Limit: 2,
      });
    },
    mask: ["S"],
  },
  {
    name: "Query with an invalid expression",
    command: () => Query({ TableName: table, KeyConditionExpression: "pk = :absent", Limit: 2 }),
  },
  {
    name: "TransactWriteItems",
    command: (side) =>
      TransactWriteItems({
        TransactItems: [
          { Put: { TableName: table, Item: key(side, "transact") } },
          { Put: { TableName: table, Item: key(side, "transact", 2) } },
        ],
      }),
  },
  {
    name: "TransactWriteItems cancelled, with each reason and the item",
    command: async (side) => {
      await seed(side, "cancel");
      return TransactWriteItems({
        TransactItems: [
          { Put: { TableName: table, Item: key(side, "cancel", 2) } },
          { Put: { TableName: table, Item: key(side, "cancel"), ...conditionFailed } },
        ],
      });
    },
    mask: ["S"],
  },
  {
    name: "SendMessage",
    command: (side) =>
      SendMessage({
        QueueUrl: queueUrl,
        MessageBody: "one",
        MessageGroupId: `send-${side}`,
        MessageDeduplicationId: `send-${side}`,
        MessageAttributes: { kind: { DataType: "String", StringValue: "k" } },
      }),
    mask: ["MessageId", "SequenceNumber"],
  },
  {
    name: "SendMessage to a missing queue",
    command: () => SendMessage({ QueueUrl: `${queueUrl}-absent.fifo`, MessageBody: "x" }),
  },
  {
    name: "SendMessageBatch",
    command: (side) =>
      SendMessageBatch({
        QueueUrl: queueUrl,
        Entries: ["1", "2"].map((Id) => ({
          Id,
          MessageBody: `body ${Id}`,
          MessageGroupId: `batch-${side}`,
          MessageDeduplicationId: `batch-${side}-${Id}`,
        })),
      }),
    mask: ["MessageId", "SequenceNumber"],
  },
  {
    name: "GetQueueAttributes",
    command: () =>
      GetQueueAttributes({
        QueueUrl: queueUrl,
        AttributeNames: ["FifoQueue", "VisibilityTimeout"],
      }),
  },
  {
    name: "ChangeMessageVisibility",
    command: async (side) =>
      ChangeMessageVisibility({
        QueueUrl: queueUrl,
        ReceiptHandle: await receivedHandle(side, "visibility"),
        VisibilityTimeout: 0,
      }),
  },
  {
    name: "ChangeMessageVisibility with a refused handle",
    command: () =>
      ChangeMessageVisibility({
        QueueUrl: queueUrl,
        ReceiptHandle: "not-a-handle",
        VisibilityTimeout: 5,
      }),
  },
  {
    name: "ChangeMessageVisibilityBatch",
    command: async (side) =>
      ChangeMessageVisibilityBatch({
        QueueUrl: queueUrl,
        Entries: [
          {
            Id: "a",
            ReceiptHandle: await receivedHandle(side, "visibility-batch"),
            VisibilityTimeout: 0,
          },
        ],
      }),
  },
  {
    name: "PutEvents",
    command: () =>
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
    mask: ["EventId"],
  },
  {
    name: "Publish",
    command: (side) =>
      Publish({
        TopicArn: topicArn,
        Message: 'a & b <c> "d"',
        MessageGroupId: "conversation-1",
        MessageDeduplicationId: `publish-${side}`,
        MessageAttributes: { recipient: { DataType: "String", StringValue: "r@example.com" } },
      }),
    mask: ["MessageId", "SequenceNumber"],
  },
  {
    name: "Publish to a missing topic",
    command: () => Publish({ TopicArn: `${topicArn}-absent.fifo`, Message: "m" }),
  },
  {
    name: "GenerateDataKey",
    command: () =>
      GenerateDataKey({ KeyId: keyArn, KeySpec: "AES_256", EncryptionContext: context }),
    mask: ["Plaintext", "CiphertextBlob"],
  },
  {
    name: "GenerateDataKey of a missing key",
    command: () =>
      GenerateDataKey({
        KeyId: `${keyArn.slice(0, keyArn.lastIndexOf("/"))}/00000000-0000-4000-8000-000000000000`,
        KeySpec: "AES_256",
      }),
  },
  {
    name: "Decrypt",
    command: async () =>
      Decrypt({ KeyId: keyArn, CiphertextBlob: await wrappedSecret(), EncryptionContext: context }),
  },
  {
    name: "Decrypt under another encryption context",
    command: async () =>
      Decrypt({
        KeyId: keyArn,
        CiphertextBlob: await wrappedSecret(),
        EncryptionContext: { ...context, customer_id: "c-2" },
      }),
  },
];

describe("the lean client and the SDK clients against moto", () => {
  it.each(MOTO_CASES.map((c) => [c.name, c] as const))("%s", async (_, contract) => {
    const lean = await outcome(moto.lean, await contract.command("lean"));
    const sdk = await outcome(moto.sdk, await contract.command("sdk"));
    expect(masked(lean, contract.mask ?? [])).toEqual(masked(sdk, contract.mask ?? []));
  });

  it("refuses a failed condition with the item, and cancels a transaction with its reasons", async () => {
    await seed("lean", "shape");
    const refused = await outcome(
      moto.lean,
      PutItem({ TableName: table, Item: key("lean", "shape"), ...conditionFailed }),
    );
    expect(refused).toMatchObject({
      error: "ConditionalCheckFailedException",
      fields: { Item: { ...key("lean", "shape"), ...attributes } },
    });
    const cancelled = await outcome(
      moto.lean,
      TransactWriteItems({
        TransactItems: [
          { Put: { TableName: table, Item: key("lean", "shape", 2) } },
          { Put: { TableName: table, Item: key("lean", "shape"), ...conditionFailed } },
        ],
      }),
    );
    expect(cancelled).toMatchObject({ error: "TransactionCanceledException" });
    const reasons = (cancelled.fields as { CancellationReasons: { Code: string; Item?: object }[] })
      .CancellationReasons;
    expect(reasons.map((r) => r.Code)).toEqual(["None", "ConditionalCheckFailed"]);
    expect(reasons[1]?.Item).toEqual({ ...key("lean", "shape"), ...attributes });
  });
});

describe("KMS's blobs through the lean client", () => {
  it("come back as bytes, as the SDK gives them: a data key, plain and wrapped, and its unwrapping", async () => {
    const made = await moto.lean.send(
      GenerateDataKey({ KeyId: keyArn, KeySpec: "AES_256", EncryptionContext: context }),
    );
    expect(made.Plaintext).toBeInstanceOf(Uint8Array);
    expect(made.Plaintext).toHaveLength(32);
    expect(made.CiphertextBlob).toBeInstanceOf(Uint8Array);
    const opened = await moto.lean.send(
      Decrypt({ KeyId: keyArn, CiphertextBlob: made.CiphertextBlob, EncryptionContext: context }),
    );
    expect(opened.Plaintext).toEqual(made.Plaintext);
    const bySdk = await moto.sdk.send(
      Decrypt({ KeyId: keyArn, CiphertextBlob: made.CiphertextBlob, EncryptionContext: context }),
    );
    expect(bySdk.Plaintext).toEqual(made.Plaintext);
  });
});

/** A call of each operation, for the stub: what it says does not matter, only that it is sent. */
const ANY_CALL: Readonly<Record<string, AwsCommand>> = {
  GetItem: GetItem({ TableName: "t", Key: { pk: { S: "a" } } }),
  BatchGetItem: BatchGetItem({ RequestItems: { t: { Keys: [{ pk: { S: "a" } }] } } }),
  PutItem: PutItem({ TableName: "t", Item: { pk: { S: "a" } } }),
  UpdateItem: UpdateItem({
    TableName: "t",
    Key: { pk: { S: "a" } },
    UpdateExpression: "SET a = :a",
  }),
  Query: Query({ TableName: "t", KeyConditionExpression: "pk = :pk" }),
  TransactWriteItems: TransactWriteItems({
    TransactItems: [{ Put: { TableName: "t", Item: {} } }],
  }),
  SendMessage: SendMessage({ QueueUrl: "http://127.0.0.1/1/q", MessageBody: "m" }),
  SendMessageBatch: SendMessageBatch({ QueueUrl: "http://127.0.0.1/1/q", Entries: [] }),
  GetQueueAttributes: GetQueueAttributes({ QueueUrl: "http://127.0.0.1/1/q" }),
  ChangeMessageVisibility: ChangeMessageVisibility({
    QueueUrl: "http://127.0.0.1/1/q",
    ReceiptHandle: "h",
    VisibilityTimeout: 1,
  }),
  ChangeMessageVisibilityBatch: ChangeMessageVisibilityBatch({
    QueueUrl: "http://127.0.0.1/1/q",
    Entries: [],
  }),
  PutEvents: PutEvents({ Entries: [{ Source: "s", DetailType: "d", Detail: "{}" }] }),
  Publish: Publish({ TopicArn: "arn:aws:sns:us-east-1:1:t", Message: "m" }),
  Converse: Converse({ modelId: "anthropic.claude-3-haiku", messages: [] }),
  GenerateDataKey: GenerateDataKey({ KeyId: "alias/k", KeySpec: "AES_256" }),
  Decrypt: Decrypt({ KeyId: "alias/k", CiphertextBlob: new Uint8Array([1, 2, 3]) }),
};

const json = (type: string, message: string, status: number, headers = {}): StubAnswer => ({
  status,
  headers: { "content-type": "application/x-amz-json-1.0", ...headers },
  body: JSON.stringify({ __type: type, message }),
});
const snsXml = (code: string, message: string, status: number): StubAnswer => ({
  status,
  headers: { "content-type": "text/xml" },
  body: `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>${status >= 500 ? "Receiver" : "Sender"}</Type><Code>${code}</Code><Message>${message}</Message></Error><RequestId>r-1</RequestId></ErrorResponse>`,
});
const restJson = (type: string, message: string, status: number): StubAnswer => ({
  status,
  headers: { "content-type": "application/json", "x-amzn-errortype": type },
  body: JSON.stringify({ message }),
});

/**
 * Throttling and a server fault, as each service sends them, and the errors a service's model
 * marks retryable.
 */
const FAULTS: Readonly<
  Record<Exclude<AwsService, "eventsv2">, Readonly<Record<string, StubAnswer>>>
> = {
  dynamodb: {
    throttled: json(
      "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
      "The level of configured provisioned throughput for the table was exceeded.",
      400,
    ),
    "server fault": json(
      "com.amazonaws.dynamodb.v20120810#InternalServerError",
      "Internal server error",
      500,
    ),
    "modelled retryable": json(
      "com.amazonaws.dynamodb.v20120810#ReplicatedWriteConflictException",
      "A replicated write conflicted",
      400,
    ),
  },
  sqs: {
    throttled: json("com.amazonaws.sqs#RequestThrottled", "Request is throttled.", 400, {
      "x-amzn-query-error": "RequestThrottled;Sender",
    }),
    "server fault": json(
      "com.amazonaws.sqs#InternalError",
      "We encountered an internal error.",
      500,
      {
        "x-amzn-query-error": "InternalError;Receiver",
      },
    ),
  },
  events: {
    throttled: json("ThrottlingException", "Rate exceeded", 400),
    "server fault": json("InternalException", "Internal failure", 500),
  },
  sns: {
    throttled: snsXml("Throttling", "Rate exceeded", 400),
    "server fault": snsXml("InternalError", "Internal failure", 500),
  },
  "bedrock-runtime": {
    throttled: restJson("ThrottlingException", "Too many requests, please wait.", 429),
    "server fault": restJson("ServiceUnavailableException", "Service unavailable", 503),
    "modelled retryable": restJson("ModelNotReadyException", "The model is loading", 429),
  },
  kms: {
    throttled: json("ThrottlingException", "Rate exceeded", 400, {
      "content-type": "application/x-amz-json-1.1",
    }),
    "server fault": json("KMSInternalException", "Internal failure", 500, {
      "content-type": "application/x-amz-json-1.1",
    }),
  },
};

describe("the lean client and the SDK clients under faults", () => {
  let stub: AwsFaultStub;
  let faulty: Clients;
  beforeAll(async () => {
    stub = await AwsFaultStub.start(() => ({ status: 500, body: "" }));
    faulty = clientsAt(stub.endpoint, 2);
  });
  afterAll(async () => stub?.stop());

  it("has a call for every operation", () => {
    expect(Object.keys(ANY_CALL).sort()).toEqual(OPERATIONS.map((o) => o.operation).sort());
  });

  /** The outcome of `command` on each client, and the requests each sent. */
  async function bothUnder(answer: StubAnswer, command: AwsCommand) {
    stub.answerWith(() => answer);
    const lean = await outcome(faulty.lean, command);
    const leanRequests = stub.requests.length;
    stub.answerWith(() => answer);
    const sdk = await outcome(faulty.sdk, command);
    return {
      lean: { ...lean, requests: leanRequests },
      sdk: { ...sdk, requests: stub.requests.length },
    };
  }

  const cases = OPERATIONS.flatMap((op) =>
    Object.keys(FAULTS[op.service as keyof typeof FAULTS]).map(
      (fault) => [op.operation, fault, op.service] as const,
    ),
  );
  it.each(cases)("%s %s: the same error, retried as often", async (operation, fault, service) => {
    const answer = FAULTS[service as keyof typeof FAULTS][fault] as StubAnswer;
    const command = ANY_CALL[operation] as AwsCommand;
    const { lean, sdk } = await bothUnder(answer, command);
    expect(lean).toEqual(sdk);
    expect(lean).toMatchObject({ attempts: 2, requests: 2, status: answer.status });
  });

  it("Converse: the same answer from a model, and the same refusal of a bad request", async () => {
    const answer = {
      status: 200,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        output: { message: { role: "assistant", content: [{ text: "hello" }] } },
        stopReason: "end_turn",
        usage: { inputTokens: 3, outputTokens: 1, totalTokens: 4 },
        metrics: { latencyMs: 12 },
      }),
    };
    const answered = await bothUnder(answer, ANY_CALL.Converse as AwsCommand);
    expect(answered.lean).toEqual(answered.sdk);
    expect(answered.lean).toMatchObject({ output: { stopReason: "end_turn" }, requests: 1 });
    const invalid = restJson("ValidationException", "The model is not supported.", 400);
    const refused = await bothUnder(invalid, ANY_CALL.Converse as AwsCommand);
    expect(refused.lean).toEqual(refused.sdk);
    expect(refused.lean).toMatchObject({ error: "ValidationException", requests: 1 });
  });
});
