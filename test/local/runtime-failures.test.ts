import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DeleteTableCommand, DynamoDBClient, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { DynamoDBRecord, SQSEvent } from "aws-lambda";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type {
  AwsClients,
  LocalDeployment,
  LocalFunction,
  LocalMapping,
} from "../../lib/dev/local/deploy";
import { LocalRuntime, type RuntimeEvent } from "../../lib/dev/local/runtime";
import { sdkFunctionClients } from "../../lib/dev/local/runtime/handlers";
import { emulator } from "../support/aws";
import { createStreamTable } from "../support/tables";

/**
 * The local runtime's pollers report a failed call and carry on: one failed GetRecords or
 * DeleteMessageBatch used to end its loop, and the stream or queue was never read again.
 */
describe("the local runtime after a failed call", () => {
  const aws = emulator();
  const dynamodb = new DynamoDBClient(aws);
  let root: string;
  let proxy: Server;
  let proxyEndpoint: string;
  /** Answer the next n GetRecords with an expired iterator (the emulator never sees them). */
  let failGetRecords = 0;
  const iteratorTypes: string[] = [];

  const fn: LocalFunction = {
    logicalId: "Handler",
    name: "handler",
    entry: "handler.mjs",
    kind: "relay",
    environment: {},
    timeoutSeconds: 30,
    memoryMb: 256,
    architecture: "arm64",
  };
  const deployment = (
    mapping: Omit<LocalMapping, "logicalId" | "functionLogicalId">,
    queue?: { url: string; arn: string },
  ): LocalDeployment => ({
    stackName: "runtime-failures",
    region: aws.region,
    accountId: "123456789012",
    resources: new Map(
      queue
        ? [["Queue", { ref: queue.url, attributes: { Arn: queue.arn }, type: "AWS::SQS::Queue" }]]
        : [],
    ),
    functions: [fn],
    mappings: [{ logicalId: "Mapping", functionLogicalId: fn.logicalId, ...mapping }],
    pipes: [],
    schedules: [],
    subscriberBuses: [],
    subscribers: [],
    bridges: [],
    skipped: {},
    outputs: {},
  });
  const until = async (what: string, done: () => boolean) => {
    const deadline = Date.now() + 20_000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  /** A table with a stream, the put of an item keyed `pk`, and its removal. */
  const streamTable = async () => {
    const table = `runtime-${ulid().toLowerCase()}`;
    const streamArn = await createStreamTable(dynamodb, table);
    return {
      streamArn,
      put: (pk: string) =>
        dynamodb.send(new PutItemCommand({ TableName: table, Item: { pk: { S: pk } } })),
      remove: () =>
        dynamodb.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined),
    };
  };
  /** A runtime whose function reads `streamArn` from its oldest record and hands each batch on. */
  const streamRuntime = (
    streamArn: string,
    sink: (event: { Records: DynamoDBRecord[] }) => void,
    more: {
      readonly mapping?: Partial<LocalMapping>;
      readonly onEvent?: (e: RuntimeEvent) => void;
    },
  ) =>
    new LocalRuntime({
      deployment: deployment({
        eventSourceArn: streamArn,
        source: "dynamodb-stream",
        batchSize: 10,
        reportBatchItemFailures: false,
        bisectBatchOnFunctionError: false,
        startingPosition: "TRIM_HORIZON",
        filters: [],
        ...more.mapping,
      }),
      ...withFunctionClients({
        dynamodb,
        sqs: new SQSClient(aws),
        eventbridge: new EventBridgeClient(aws),
      }),
      endpoint: proxyEndpoint,
      root,
      services: { sink },
      ...(more.onEvent ? { onEvent: more.onEvent } : {}),
    });

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "agentbus-runtime-"));
    // Hands every event to the `sink` service the test passes in.
    writeFileSync(
      join(root, fn.entry),
      "export const create = (options) => async (event) => options.sink(event);\n",
    );
    // The DynamoDB Streams endpoint the runtime reads: the emulator, but for injected failures.
    proxy = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (c: Buffer) => chunks.push(c));
      request.on("end", async () => {
        const body = Buffer.concat(chunks);
        const target = String(request.headers["x-amz-target"] ?? "");
        if (target.endsWith(".GetShardIterator"))
          iteratorTypes.push(JSON.parse(body.toString()).ShardIteratorType);
        if (target.endsWith(".GetRecords") && failGetRecords > 0) {
          failGetRecords--;
          response.writeHead(400, { "content-type": "application/x-amz-json-1.0" });
          response.end(
            JSON.stringify({
              __type: "com.amazonaws.dynamodb.v20120810#ExpiredIteratorException",
              message: "Iterator expired",
            }),
          );
          return;
        }
        const headers = Object.fromEntries(
          Object.entries(request.headers).filter(
            (e): e is [string, string] => typeof e[1] === "string",
          ),
        );
        const answer = await fetch(`${aws.endpoint}${request.url}`, {
          method: request.method,
          headers,
          body: body.length > 0 ? body : undefined,
        });
        response.writeHead(answer.status, {
          "content-type": answer.headers.get("content-type") ?? "application/json",
        });
        response.end(Buffer.from(await answer.arrayBuffer()));
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const address = proxy.address();
    proxyEndpoint = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => proxy?.close(resolve));
    dynamodb.destroy();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it("a failed GetRecords is reported and the stream is read on after the last record handled", async () => {
    const { streamArn, put, remove } = await streamTable();
    const seen: string[] = [];
    const events: RuntimeEvent[] = [];
    const runtime = streamRuntime(
      streamArn,
      (event) => {
        for (const r of event.Records) seen.push(r.dynamodb?.Keys?.pk?.S ?? "");
      },
      { onEvent: (e) => events.push(e) },
    );
    await runtime.start();
    try {
      await put("a");
      await until("record a", () => seen.length === 1);
      runtime.pauseStream();
      await put("b");
      await put("c");
      failGetRecords = 2;
      runtime.resumeStream();
      await until("records b and c", () => seen.length >= 3);
      await put("d");
      await until("record d", () => seen.length >= 4);
      await runtime.idle({ quietMs: 300, timeoutMs: 10_000 });

      expect(seen).toEqual(["a", "b", "c", "d"]);
      const failures = events.filter((e) => e.kind === "invocation-failed");
      expect(failures).toHaveLength(2);
      expect(failures[0]).toMatchObject({
        function: "handler",
        error: expect.stringMatching(/^GetRecords: ExpiredIteratorException/),
      });
      expect(iteratorTypes).toEqual([
        "TRIM_HORIZON",
        "AFTER_SEQUENCE_NUMBER",
        "AFTER_SEQUENCE_NUMBER",
      ]);
    } finally {
      await runtime.stop();
      await remove();
    }
  });

  it("a stream mapping with a batching window gathers what comes within it into one batch", async () => {
    const { streamArn, put, remove } = await streamTable();
    const batches: string[][] = [];
    const runtime = streamRuntime(
      streamArn,
      (event) => batches.push(event.Records.map((r) => r.dynamodb?.Keys?.pk?.S ?? "")),
      { mapping: { maximumBatchingWindowSeconds: 2 } },
    );
    await runtime.start();
    try {
      // 300 ms apart: without a window each would be a batch of its own (the runtime reads a
      // shard every 50 ms); within the 2 s window they are one.
      for (const pk of ["a", "b", "c"]) {
        await put(pk);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      await until("records a, b and c", () => batches.flat().length >= 3);
      await runtime.idle({ quietMs: 300, timeoutMs: 10_000 });

      expect(batches).toEqual([["a", "b", "c"]]);
    } finally {
      await runtime.stop();
      await remove();
    }
  });

  it("a failed DeleteMessageBatch is reported and the queue is read on", async () => {
    const sqs = new SQSClient(aws);
    let failDeletes = 1;
    sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === "DeleteMessageBatchCommand" && failDeletes > 0) {
          failDeletes--;
          throw new Error("injected: the emulator did not answer");
        }
        return next(args);
      },
      { step: "initialize" },
    );
    const { QueueUrl: url = "" } = await sqs.send(
      new CreateQueueCommand({
        QueueName: `runtime-${ulid().toLowerCase()}`,
        Attributes: { VisibilityTimeout: "1" },
      }),
    );
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }),
    );
    const arn = Attributes?.QueueArn ?? "";
    const bodies: string[] = [];
    const events: RuntimeEvent[] = [];
    const runtime = new LocalRuntime({
      deployment: deployment(
        {
          eventSourceArn: arn,
          source: "sqs",
          batchSize: 1,
          maximumConcurrency: 1,
          reportBatchItemFailures: false,
          bisectBatchOnFunctionError: false,
          filters: [],
        },
        { url, arn },
      ),
      ...withFunctionClients({ dynamodb, sqs, eventbridge: new EventBridgeClient(aws) }),
      endpoint: aws.endpoint,
      root,
      services: {
        sink: (event: SQSEvent) => {
          for (const r of event.Records) bodies.push(r.body);
        },
      },
      onEvent: (e) => events.push(e),
    });
    await runtime.start();
    try {
      await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "first" }));
      await until("the first message", () => bodies.includes("first"));
      await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "second" }));
      await until("the second message", () => bodies.includes("second"));
      // The first one, not deleted, comes back after its visibility timeout.
      await until("the first message again", () => bodies.filter((b) => b === "first").length > 1);
      await runtime.idle({ quietMs: 300, timeoutMs: 10_000 });
      expect(events).toContainEqual({
        kind: "invocation-failed",
        function: "handler",
        error: expect.stringMatching(/^DeleteMessageBatch: .*injected/),
      });
    } finally {
      await runtime.stop();
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      sqs.destroy();
    }
  });
});

/** The runtime's clients, and the same as the functions' clients. */
function withFunctionClients(clients: AwsClients) {
  return { clients, functionClients: sdkFunctionClients(clients) };
}
