import {
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import { GenerateDataKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import { GetQueueUrlCommand, SQSClient } from "@aws-sdk/client-sqs";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callOf, faultyHttp } from "../../lib/dev/chaos/http-faults";
import type { FaultDraws } from "../../lib/dev/chaos/plan";
import type { CallFault } from "../../lib/dev/faults/kinds";
import { Faults, type HttpSender, InvocationCrash } from "../../lib/dev/local/runtime/faults";
import { emulator } from "../support/aws";

/**
 * Faults at the HTTP seam of the functions' SDK clients (lib/dev/chaos/http-faults.ts), which the
 * chaos run puts under their request handler: each answer is the service's, below the SDK's
 * retries, so what is exercised is how the SDK reads and retries it, against moto.
 */

type Draws = Pick<FaultDraws, "callFault" | "skewed" | "crashAfter">;

/**
 * The first `times` calls meet `fault`, the rest none; a crash after the first write if asked;
 * the first `skews` requests refused as signed at the wrong time.
 */
function draws(fault: CallFault | undefined, times = 99, crashAfterWrite = false, skews = 0) {
  let calls = 0;
  let skewed = 0;
  const seen: string[] = [];
  const plan: Draws = {
    skewed: (service, operation) => {
      if (skewed >= skews) return false;
      skewed += 1;
      seen.push(`${service} ${operation} skewed`);
      return true;
    },
    callFault: (service, operation) => {
      seen.push(`${service} ${operation}`);
      calls += 1;
      return calls <= times ? fault : undefined;
    },
    crashAfter: () => crashAfterWrite,
  };
  return { plan, seen };
}

const invoke = <T>(work: () => Promise<T>) =>
  new Faults(() => {}).invoke(
    { function: "fn", kind: "consumer", group: "g", attempt: 1, messageIds: [] },
    work,
  );

const outcome = (work: () => Promise<unknown>) =>
  invoke(work).then(
    () => undefined,
    (error: unknown) =>
      error as Error & {
        code?: string;
        $metadata?: { attempts?: number; httpStatusCode?: number };
        CancellationReasons?: { Code: string }[];
      },
  );

describe("faults at the HTTP seam of the SDK clients", () => {
  const table = `http-faults-${ulid().toLowerCase()}`;
  const made: { destroy(): void }[] = [];
  const configWith = (plan: Draws) => ({
    ...emulator(),
    maxAttempts: 3,
    requestHandler: faultyHttp(new NodeHttpHandler() as HttpSender, plan),
  });
  /** An SDK client of `Client`'s service whose requests meet `plan`'s faults. */
  function clientWith<C extends { destroy(): void }>(
    Client: new (config: ReturnType<typeof configWith>) => C,
    plan: Draws,
  ): C {
    const client = new Client(configWith(plan));
    made.push(client);
    return client;
  }
  const dynamoWith = (plan: Draws) => clientWith(DynamoDBClient, plan);
  const plain = new DynamoDBClient({ ...emulator(), maxAttempts: 1 });
  const put = (id: string) => new PutItemCommand({ TableName: table, Item: { pk: { S: id } } });
  const stored = async (id: string) =>
    (await plain.send(new GetItemCommand({ TableName: table, Key: { pk: { S: id } } }))).Item !==
    undefined;

  beforeAll(async () => {
    await plain.send(
      new CreateTableCommand({
        TableName: table,
        KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
        AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
  });
  afterAll(() => {
    for (const client of [plain, ...made]) client.destroy();
  });

  it("tells each call's service and operation from the request", () => {
    const of = (target?: string, body = "") =>
      callOf({ headers: target ? { "x-amz-target": target } : {}, body });
    expect([
      of("DynamoDB_20120810.TransactWriteItems"),
      of("AmazonSQS.SendMessageBatch"),
      of("AWSEvents.PutEvents"),
      of(undefined, "Action=Publish&Version=2010-03-31"),
      of("TrentService.GenerateDataKey"),
      of("BedrockRuntime.Converse"),
    ]).toEqual([
      { service: "dynamodb", operation: "TransactWriteItems" },
      { service: "sqs", operation: "SendMessageBatch" },
      { service: "eventbridge", operation: "PutEvents" },
      { service: "sns", operation: "Publish" },
      { service: "kms", operation: "GenerateDataKey" },
      undefined,
    ]);
  });

  it("a throttle the SDK retries through: one fault, then the write, in one call", async () => {
    const { plan, seen } = draws("throttle", 1);
    await invoke(() => dynamoWith(plan).send(put("retried")));
    expect(seen).toEqual(["dynamodb PutItem", "dynamodb PutItem"]);
    expect(await stored("retried")).toBe(true);
  });

  it("throttles past its attempts: the service's throttling error, classified as the SDK does", async () => {
    const error = await outcome(() => dynamoWith(draws("throttle").plan).send(put("throttled")));
    expect(error?.name).toBe("ProvisionedThroughputExceededException");
    expect(error?.$metadata?.attempts).toBe(3);
    expect(isThrottlingError(error as never)).toBe(true);
    expect(await stored("throttled")).toBe(false);
    const sqs = await outcome(() =>
      clientWith(SQSClient, draws("throttle").plan).send(
        new GetQueueUrlCommand({ QueueName: "nowhere" }),
      ),
    );
    expect(sqs?.name).toBe("RequestThrottled");
    expect(isThrottlingError(sqs as never)).toBe(true);
    // KMS (the customers' data keys): its generic ThrottlingException, then a 5xx of its own.
    const dataKey = new GenerateDataKeyCommand({ KeyId: "alias/none", KeySpec: "AES_256" });
    const kms = await outcome(() => clientWith(KMSClient, draws("throttle").plan).send(dataKey));
    expect([kms?.name, kms?.$metadata?.attempts, isThrottlingError(kms as never)]).toEqual([
      "ThrottlingException",
      3,
      true,
    ]);
    const kmsFault = await outcome(() =>
      clientWith(KMSClient, draws("server-error").plan).send(dataKey),
    );
    // Retried as a 5xx (its status), as the SDK retries it.
    expect([
      kmsFault?.name,
      kmsFault?.$metadata?.httpStatusCode,
      kmsFault?.$metadata?.attempts,
    ]).toEqual(["KMSInternalException", 500, 3]);
  });

  it("a throttled transaction: cancelled with a ThrottlingError reason", async () => {
    const transact = new TransactWriteItemsCommand({
      TransactItems: [
        { Put: { TableName: table, Item: { pk: { S: "tx-1" } } } },
        { Put: { TableName: table, Item: { pk: { S: "tx-2" } } } },
      ],
    });
    const error = await outcome(() => dynamoWith(draws("throttle").plan).send(transact));
    expect(error?.name).toBe("TransactionCanceledException");
    expect(error?.CancellationReasons?.map((r) => r.Code)).toEqual(["ThrottlingError", "None"]);
    expect(await stored("tx-1")).toBe(false);
  });

  it("a server error and a reset are retried, and classified as the SDK does when they last", async () => {
    const server = await outcome(() => dynamoWith(draws("server-error").plan).send(put("5xx")));
    const reset = await outcome(() => dynamoWith(draws("connection-reset").plan).send(put("rst")));
    // A 500 is transient to the SDK's classification (and so retried), as it is here.
    const retryable = (e: unknown) => isTransientError(e as never) || isServerError(e as never);
    expect([server?.name, server?.$metadata?.attempts, retryable(server)]).toEqual([
      "InternalServerError",
      3,
      true,
    ]);
    expect([reset?.code, isTransientError(reset as never)]).toEqual(["ECONNRESET", true]);
    expect([await stored("5xx"), await stored("rst")]).toEqual([false, false]);
  });

  it("a timeout after the write applied: the item is there, the caller is told it timed out", async () => {
    const error = await outcome(() =>
      dynamoWith(draws("timeout-after-apply").plan).send(put("applied")),
    );
    expect(error?.name).toBe("TimeoutError");
    expect(await stored("applied")).toBe(true);
  });

  it("a crash after a write: applied, then the invocation is dead and sends nothing more", async () => {
    const { plan, seen } = draws(undefined, 0, true);
    const client = dynamoWith(plan);
    const error = await outcome(async () => {
      await client.send(put("crashed")).catch(() => undefined);
      return client.send(put("after"));
    });
    expect(error).toBeInstanceOf(InvocationCrash);
    expect(seen).toEqual(["dynamodb PutItem"]);
    expect([await stored("crashed"), await stored("after")]).toEqual([true, false]);
  });

  it("a clock skew: refused with the service's Date, the SDK corrects its clock and retries", async () => {
    const { plan, seen } = draws(undefined, 0, false, 1);
    const client = dynamoWith(plan);
    await invoke(() => client.send(put("skewed")));
    expect(seen).toEqual(["dynamodb PutItem skewed", "dynamodb PutItem"]);
    expect(await stored("skewed")).toBe(true);
  });

  it("leaves calls made outside a function invocation alone", async () => {
    const { plan, seen } = draws("throttle");
    await dynamoWith(plan).send(put("outside"));
    expect(seen).toEqual([]);
    expect(await stored("outside")).toBe(true);
  });
});
