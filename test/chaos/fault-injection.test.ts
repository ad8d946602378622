import {
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
  InternalServerError,
  ProvisionedThroughputExceededException,
  PutItemCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  ReceiveMessageCommand,
  RequestThrottled,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalChannel } from "../../functions/roles/customer-support/integrations/reply-channel/memory";
import {
  type ChannelPort,
  ChannelTimeoutError,
} from "../../functions/roles/customer-support/integrations/reply-channel/port";
import { FAULTED_ATTEMPTS, FaultInjector } from "../../lib/dev/chaos/injector";
import { injectFaults } from "../../lib/dev/chaos/middleware";
import { type FaultPlan, planOf } from "../../lib/dev/chaos/plan";
import { FAULT_KINDS, type FaultKind } from "../../lib/dev/faults/kinds";
import { describePlan } from "../../lib/dev/faults/schedule";
import { Faults, type Invocation, InvocationCrash } from "../../lib/dev/local/runtime/faults";
import { emulator } from "../support/aws";

/** A plan where only `kind` is on, at `rate`. */
const only = (kind: FaultKind, rate = 1, seed = 7): FaultPlan => ({
  seed,
  rates: Object.fromEntries(FAULT_KINDS.map((k) => [k, k === kind ? rate : 0])) as Record<
    FaultKind,
    number
  >,
});

const invocation = (attempt = 1): Omit<Invocation, "crashed"> => ({
  function: "test-fn",
  kind: "consumer",
  group: "test-group",
  attempt,
  messageIds: [],
});

/** Runs `work` as one function invocation (the scope the faults strike in). */
const invoke = <T>(work: () => Promise<T>, attempt = 1) =>
  new Faults(() => {}).invoke(invocation(attempt), work);

describe("fault plan", () => {
  it("is the same for the same seed, and printed with its seed", () => {
    expect(planOf(42)).toEqual(planOf(42));
    const plans = Array.from({ length: 50 }, (_, i) => JSON.stringify(planOf(i + 1).rates));
    expect(new Set(plans).size).toBeGreaterThan(10);
    expect(describePlan(only("throttle", 0.04, 9))).toBe("seed 9: throttle 0.04");
  });

  it("draws the same faults for the same seed and the same calls", () => {
    const draws = () => {
      const injector = new FaultInjector();
      injector.begin(planOf(3));
      const scope = { ...invocation(), crashed: false };
      return Array.from({ length: 500 }, () => injector.callFault("dynamodb", "PutItem", scope));
    };
    expect(draws()).toEqual(draws());
  });
});

describe("fault middleware on an SDK client", () => {
  const config = { ...emulator(), maxAttempts: 1 };
  const dynamodb = new DynamoDBClient(config);
  const sqs = new SQSClient(config);
  const injector = new FaultInjector();
  const table = `chaos-${ulid().toLowerCase()}`;
  let queueUrl = "";
  injectFaults(dynamodb, "dynamodb", injector);
  injectFaults(sqs, "sqs", injector);

  const put = (id: string) =>
    dynamodb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: id } } }));
  const stored = async (id: string) =>
    (await dynamodb.send(new GetItemCommand({ TableName: table, Key: { pk: { S: id } } }))).Item !==
    undefined;
  const failure = (work: () => Promise<unknown>, attempt = 1) =>
    invoke(work, attempt).then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    );

  beforeAll(async () => {
    await dynamodb.send(
      new CreateTableCommand({
        TableName: table,
        KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
        AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
    queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: table }))).QueueUrl ?? "";
  });

  afterAll(() => {
    dynamodb.destroy();
    sqs.destroy();
  });

  it("leaves calls made outside a function invocation alone", async () => {
    injector.begin(only("throttle"));
    await put("outside");
    expect(await stored("outside")).toBe(true);
  });

  it("throttle: the service's own throttling exception, thrown before sending", async () => {
    injector.begin(only("throttle"));
    const error = await failure(() => put("throttled"));
    expect(error).toBeInstanceOf(ProvisionedThroughputExceededException);
    expect(isThrottlingError(error as never)).toBe(true);
    expect(await stored("throttled")).toBe(false);
    const sqsError = await failure(() =>
      sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: "x" })),
    );
    expect(sqsError).toBeInstanceOf(RequestThrottled);
    expect(isThrottlingError(sqsError as never)).toBe(true);
  });

  it("throttle of a transaction: cancelled with a ThrottlingError reason, as DynamoDB does", async () => {
    injector.begin(only("throttle"));
    const error = await failure(() =>
      dynamodb.send(
        new TransactWriteItemsCommand({
          TransactItems: [{ Put: { TableName: table, Item: { pk: { S: "tx" } } } }],
        }),
      ),
    );
    expect(error).toBeInstanceOf(TransactionCanceledException);
    expect((error as TransactionCanceledException).CancellationReasons?.[0]?.Code).toBe(
      "ThrottlingError",
    );
    expect(await stored("tx")).toBe(false);
  });

  it("server error: a 5xx exception, nothing written", async () => {
    injector.begin(only("server-error"));
    const error = await failure(() => put("server"));
    expect(error).toBeInstanceOf(InternalServerError);
    expect((error as InternalServerError).$fault).toBe("server");
    expect(isTransientError(error as never) || isServerError(error as never)).toBe(true);
    expect(await stored("server")).toBe(false);
  });

  it("connection reset: ECONNRESET before sending, nothing written", async () => {
    injector.begin(only("connection-reset"));
    const error = await failure(() => put("reset"));
    expect(error?.code).toBe("ECONNRESET");
    expect(isTransientError(error as never)).toBe(true);
    expect(await stored("reset")).toBe(false);
  });

  it("timeout after apply: the write is applied, the caller gets a TimeoutError", async () => {
    injector.begin(only("timeout-after-apply"));
    const error = await failure(() => put("applied"));
    expect(error?.name).toBe("TimeoutError");
    expect(isTransientError(error as never)).toBe(true);
    expect(await stored("applied")).toBe(true);
  });

  it("crash after a write: applied, then the invocation is dead and sends nothing more", async () => {
    injector.begin(only("crash-after-write"));
    let second: unknown;
    const error = await failure(async () => {
      await put("crash-1").catch(() => undefined);
      second = await put("crash-2").catch((e: unknown) => e);
      return "answered";
    });
    expect(error).toBeInstanceOf(InvocationCrash);
    expect(second).toBeInstanceOf(InvocationCrash);
    expect(await stored("crash-1")).toBe(true);
    expect(await stored("crash-2")).toBe(false);
  });

  it("spares visibility changes before sending (they would only cost time), not after", async () => {
    await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: "m" }));
    const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl }));
    const change = () =>
      sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: Messages[0]?.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      );
    injector.begin(only("throttle"));
    expect(await failure(change)).toBeUndefined();
    injector.begin(only("timeout-after-apply"));
    expect((await failure(change))?.name).toBe("TimeoutError");
  });

  it(`strikes only a message's first ${FAULTED_ATTEMPTS} deliveries, and counts what it injected`, async () => {
    injector.begin(only("throttle"));
    expect(await failure(() => put("late"), FAULTED_ATTEMPTS + 1)).toBeUndefined();
    expect(await stored("late")).toBe(true);
    await failure(() => put("early"), FAULTED_ATTEMPTS);
    expect(injector.end()).toEqual({ "throttle dynamodb": 1 });
  });
});

describe("lost acknowledgements", () => {
  it(`lose a message's acknowledgement by a group at most ${FAULTED_ATTEMPTS} times, so SQS never dead-letters it for that`, () => {
    const injector = new FaultInjector();
    injector.begin(only("lost-ack"));
    const lost = (group: string, eventId: string) =>
      Array.from({ length: 5 }, () => injector.loseAck(group, eventId)).filter(Boolean).length;
    expect(lost("audit", "e1")).toBe(FAULTED_ATTEMPTS);
    expect(lost("router", "e1")).toBe(FAULTED_ATTEMPTS);
    expect(lost("audit", "e2")).toBe(FAULTED_ATTEMPTS);
    expect(injector.end()).toEqual({ "lost-ack audit": 4, "lost-ack router": 2 });
    injector.begin(only("lost-ack"));
    expect(lost("audit", "e1")).toBe(FAULTED_ATTEMPTS);
  });
});

describe("reply channel under faults", () => {
  const injector = new FaultInjector();
  const local = new LocalChannel();
  const model = { name: "none", converse: () => Promise.reject(new Error("no model")) };
  const channel = injector.services({ model, replyChannel: local }).replyChannel as ChannelPort;
  const request = (key: string) => ({
    key,
    recipient: "cust_a",
    conversationId: "conv_a",
    text: "hi",
  });

  it("timeout after apply delivers, then throws ChannelTimeoutError", async () => {
    injector.begin(only("timeout-after-apply"));
    const error = await invoke(() => channel.send(request("t:send:1"))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChannelTimeoutError);
    expect(local.deliveries().map((d) => d.key)).toEqual(["t:send:1"]);
  });

  it("a connection reset delivers nothing", async () => {
    injector.begin(only("connection-reset"));
    const error = await invoke(() => channel.send(request("r:send:1"))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ChannelTimeoutError);
    expect(local.deliveries().map((d) => d.key)).not.toContain("r:send:1");
  });
});

describe("model call past its visibility timeout", () => {
  it("hands the batch back, and answers once another worker has received it again", async () => {
    const injector = new FaultInjector();
    injector.begin(only("stall"));
    const answers = { name: "scripted", converse: async () => ({ text: "ok" }) as never };
    const { model } = injector.services({ model: answers, channel: new LocalChannel() });
    const events: string[] = [];
    const stalled = new Faults(() => {}).invoke(
      {
        ...invocation(),
        messageIds: ["m-1"],
        release: async () => {
          events.push("released");
        },
      },
      async () => {
        await model.converse({} as never);
        events.push("answered");
      },
    );
    await new Promise((r) => setTimeout(r, 50));
    expect(events).toEqual(["released"]);
    injector.received(["m-1"]);
    await stalled;
    expect(events).toEqual(["released", "answered"]);
    expect(injector.end()).toEqual({ "stall test-group": 1 });
  });
});
