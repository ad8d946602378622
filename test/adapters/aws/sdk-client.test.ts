import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SQSClient } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { AwsCommand, AwsService, SdkClient } from "../../../functions/adapters/aws/client";
import * as operations from "../../../functions/adapters/aws/operations";
import {
  BatchGetItem,
  ChangeMessageVisibility,
  ChangeMessageVisibilityBatch,
  Converse,
  Decrypt,
  GenerateDataKey,
  GetItem,
  GetParameter,
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
import { fromSdk, sdkAwsClient } from "../../../functions/adapters/aws/sdk-client";
import { AwsFaultStub, type StubRequest } from "../../support/aws-fault-stub";

/**
 * The functions' AWS port on the SDK v3 clients: each operation of operations.ts names the SDK
 * client and command classes that send it, and they must be the ones of its service and name (the
 * X-Ray subsegments, the metering and the chaos faults go by those names); the container's client
 * makes one SDK client per service and keeps it. What the SDK does with a call (serde, retries,
 * errors) is the SDK's, and the adapters' tests meet it against moto.
 */

const QUEUE = "http://127.0.0.1/123456789012/q";
const CALLS: Readonly<Record<string, AwsCommand>> = {
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
  SendMessage: SendMessage({ QueueUrl: QUEUE, MessageBody: "m" }),
  SendMessageBatch: SendMessageBatch({ QueueUrl: QUEUE, Entries: [] }),
  GetQueueAttributes: GetQueueAttributes({ QueueUrl: QUEUE }),
  ChangeMessageVisibility: ChangeMessageVisibility({
    QueueUrl: QUEUE,
    ReceiptHandle: "h",
    VisibilityTimeout: 1,
  }),
  ChangeMessageVisibilityBatch: ChangeMessageVisibilityBatch({ QueueUrl: QUEUE, Entries: [] }),
  PutEvents: PutEvents({ Entries: [{ Source: "s", DetailType: "d", Detail: "{}" }] }),
  Publish: Publish({ TopicArn: "arn:aws:sns:us-east-1:1:t", Message: "m" }),
  Converse: Converse({ modelId: "anthropic.claude-3-haiku", messages: [] }),
  GenerateDataKey: GenerateDataKey({ KeyId: "alias/k", KeySpec: "AES_256" }),
  Decrypt: Decrypt({ KeyId: "alias/k", CiphertextBlob: new Uint8Array([1, 2, 3]) }),
  GetParameter: GetParameter({ Name: "/crm/mcp-token", WithDecryption: true }),
};

/** The SigV4 signing name of each service. */
const SIGNING_NAMES: Readonly<Record<Exclude<AwsService, "eventsv2">, string>> = {
  dynamodb: "dynamodb",
  sqs: "sqs",
  events: "events",
  sns: "sns",
  "bedrock-runtime": "bedrock",
  kms: "kms",
  ssm: "ssm",
};

/** The operation a request calls, as the service reads it: its target, action or path. */
function operationOf(request: StubRequest): string | undefined {
  const target = request.headers["x-amz-target"];
  if (typeof target === "string") return target.split(".")[1];
  const action = /(?:^|&)Action=([A-Za-z]+)/.exec(request.body)?.[1];
  if (action) return action;
  return /^\/model\/[^/]+\/(converse)$/.exec(request.path)?.[1] === "converse"
    ? "Converse"
    : undefined;
}

let stub: AwsFaultStub;
const made: { destroy(): void }[] = [];

beforeAll(async () => {
  stub = await AwsFaultStub.start(() => ({ status: 500, body: "" }));
});
afterAll(async () => {
  for (const client of made) client.destroy();
  await stub?.stop();
});
afterEach(() => vi.unstubAllEnvs());

describe("the operations' SDK classes", () => {
  it("cover every operation", () => {
    const named = Object.values(operations).map((op) => op.operation);
    expect(Object.keys(CALLS).sort()).toEqual(named.sort());
    for (const op of Object.values(operations)) expect(op.sdk).toBeDefined();
  });

  it.each(Object.keys(CALLS))(
    "%s: sent by its service's client as that operation",
    async (name) => {
      const command = CALLS[name] as AwsCommand;
      const Client = command.sdk?.Client as unknown as new (
        config: object,
      ) => SdkClient & {
        destroy(): void;
      };
      // One attempt; HTTP/1.1, which the stub speaks (Bedrock Runtime's client defaults to HTTP/2).
      const client = new Client({
        endpoint: stub.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
        maxAttempts: 1,
        requestHandler: new NodeHttpHandler(),
      });
      made.push(client);
      stub.answerWith(() => ({ status: 500, body: "" }));
      await expect(fromSdk(client).send(command)).rejects.toBeDefined();
      const [request] = stub.requests;
      expect(request && operationOf(request)).toBe(command.operation);
      const signing = SIGNING_NAMES[command.service as keyof typeof SIGNING_NAMES];
      expect(request?.headers.authorization).toContain(`/us-east-1/${signing}/aws4_request`);
    },
  );
});

describe("the container's client on the SDK clients", () => {
  it("makes one SDK client per service, on its first call, and keeps it", async () => {
    const senders = new Map<string, Set<unknown>>();
    for (const Client of [DynamoDBClient, SQSClient])
      vi.spyOn(Client.prototype, "send").mockImplementation(async function (this: unknown) {
        senders.set(Client.name, (senders.get(Client.name) ?? new Set()).add(this));
        return { $metadata: {} };
      });
    const client = sdkAwsClient();
    await client.send(CALLS.GetItem as AwsCommand);
    await client.send(CALLS.PutItem as AwsCommand);
    await client.send(CALLS.SendMessage as AwsCommand);
    expect(senders.get("DynamoDBClient")?.size).toBe(1);
    expect(senders.get("SQSClient")?.size).toBe(1);
    vi.restoreAllMocks();
  });

  it("adds a command's headers to its request (the X-Ray trace header)", async () => {
    vi.stubEnv("AWS_ENDPOINT_URL", stub.endpoint);
    vi.stubEnv("AWS_REGION", "us-east-1");
    vi.stubEnv("AWS_ACCESS_KEY_ID", "testing");
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", "testing");
    vi.stubEnv("AWS_MAX_ATTEMPTS", "1");
    stub.answerWith(() => ({ status: 500, body: "" }));
    const trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    const command = { ...(CALLS.GetItem as AwsCommand), headers: { "X-Amzn-Trace-Id": trace } };
    await expect(sdkAwsClient().send(command)).rejects.toBeDefined();
    expect(stub.requests[0]?.headers["x-amzn-trace-id"]).toBe(trace);
  });

  it("refuses a command no SDK client sends, naming it", async () => {
    await expect(
      sdkAwsClient().send({ service: "eventsv2", operation: "PutEvents", input: {} }),
    ).rejects.toThrow("no AWS SDK client sends eventsv2 PutEvents");
  });
});
