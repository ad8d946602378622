import {
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqsDeadLetterSink } from "../../functions/adapters/sqs/dead-letter-sink";
import { SqsFifoSender } from "../../functions/adapters/sqs/fifo-sender";
import { extendVisibility } from "../../functions/adapters/sqs/visibility";
import { dispatch } from "../../functions/core/dispatch";
import type { AgentBusError } from "../../functions/core/errors";
import { meter } from "../../lib/dev/metering/metering";
import { fromSdk } from "../../lib/operator/from-sdk";
import { registry } from "../../schemas";
import { emulator } from "../support/aws";
import { newUlid, taskStream } from "../support/factories";
import { createQueue, drainQueue } from "../support/queues";

const suffix = newUlid().toLowerCase();
let sqs: SQSClient;
const created: string[] = [];

async function queue(name: string, fifo = false): Promise<string> {
  const url = await createQueue(sqs, `${name}-${suffix}`, fifo);
  created.push(url);
  return url;
}

const drain = (url: string) => drainQueue(sqs, url);

async function failureOf(promise: Promise<unknown>): Promise<AgentBusError> {
  try {
    await promise;
  } catch (error) {
    return error as AgentBusError;
  }
  throw new Error("expected the call to fail");
}

beforeAll(() => {
  sqs = new SQSClient(emulator());
});

afterAll(async () => {
  for (const url of created) await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
  sqs.destroy();
});

describe("SqsFifoSender", () => {
  it("keeps each group in order and drops a repeated deduplication id", async () => {
    const url = await queue("fifo-order", true);
    const own = new SQSClient(emulator());
    const metered = meter(own);
    const sender = new SqsFifoSender({ client: fromSdk(own), queueUrl: url });
    const m = (id: string, groupId: string, deduplicationId = `dedup-${id}`) => ({
      id,
      groupId,
      deduplicationId,
      body: JSON.stringify({ id }),
    });
    expect(await sender.send([m("a1", "A"), m("b1", "B"), m("a2", "A"), m("a3", "A")])).toEqual([]);
    // a1 again (same deduplication id, new entry id) is accepted by SQS and then dropped.
    expect(await sender.send([m("again", "A", "dedup-a1"), m("b2", "B")])).toEqual([]);
    expect(metered.snapshot().calls).toEqual({ SendMessageBatch: 2 });

    const received = await drain(url);
    const bodies = (group: string) =>
      received
        .filter((r) => r.Attributes?.MessageGroupId === group)
        .map((r) => (JSON.parse(r.Body ?? "{}") as { id: string }).id);
    expect(bodies("A")).toEqual(["a1", "a2", "a3"]);
    expect(bodies("B")).toEqual(["b1", "b2"]);
    expect(received).toHaveLength(5);
    own.destroy();
  });

  it("maps Failed entries to { id, code, message }", async () => {
    const own = new SQSClient(emulator());
    own.middlewareStack.add(
      () => async () => ({
        output: {
          Successful: [{ Id: "0", MessageId: "m", MD5OfMessageBody: "x" }],
          Failed: [{ Id: "1", Code: "InternalError", Message: "try again", SenderFault: false }],
          $metadata: {},
        },
        response: {},
      }),
      { step: "initialize", name: "fake-batch" },
    );
    const sender = new SqsFifoSender({ client: fromSdk(own), queueUrl: "https://example/q.fifo" });
    const messages = ["0", "1"].map((id) => ({ id, groupId: "g", deduplicationId: id, body: id }));
    expect(await sender.send(messages)).toEqual([
      { id: "1", code: "InternalError", message: "try again" },
    ]);
    own.destroy();
  });

  it("throws TransientError when the whole call fails", async () => {
    const sender = new SqsFifoSender({
      client: fromSdk(sqs),
      queueUrl: `${(await queue("fifo-gone", true)).replace("fifo-gone", "fifo-never")}`,
    });
    const error = await failureOf(
      sender.send([{ id: "1", groupId: "g", deduplicationId: "d", body: "{}" }]),
    );
    expect(error).toMatchObject({ errorClass: "transient", code: "sqs.queue_does_not_exist" });
  });

  it("serves the core dispatch with the dead-letter sink", async () => {
    const target = await queue("dispatch-target", true);
    const dlq = await queue("dispatch-dlq", true);
    const events = taskStream(1, 3);
    const items = [
      ...events.map((envelope, i) => ({
        recordId: `r${i}`,
        envelope,
        rawBody: JSON.stringify({ detail: envelope }),
      })),
      { recordId: "bad", envelope: { event_type: "nope" }, rawBody: '{"detail":{}}' },
    ];
    const report = await dispatch(
      items,
      registry,
      new SqsFifoSender({ client: fromSdk(sqs), queueUrl: target }),
      new SqsDeadLetterSink({ client: fromSdk(sqs), queueUrl: dlq }),
    );
    expect(report).toMatchObject({ sent: 3, deadLettered: 1, calls: 1, failedRecordIds: [] });
    const delivered = await drain(target);
    expect(delivered.map((m) => JSON.parse(m.Body ?? "{}").event_id)).toEqual(
      events.map((e) => e.event_id),
    );
    expect(delivered.every((m) => m.Attributes?.MessageGroupId === events[0]?.order_key)).toBe(
      true,
    );
    const dead = await drain(dlq);
    expect(dead).toHaveLength(1);
    expect(dead[0]?.MessageAttributes?.["agentbus.error_code"]?.StringValue).toBe(
      "envelope.invalid",
    );
  });
});

describe("SqsDeadLetterSink", () => {
  it("sends the body with the error code and a reason cut to 1000 characters", async () => {
    const url = await queue("dlq-standard");
    const sink = new SqsDeadLetterSink({ client: fromSdk(sqs), queueUrl: url });
    await sink.send({ body: '{"a":1}', code: "envelope.invalid", reason: "é".repeat(1500) });
    const [message, ...rest] = await drain(url);
    expect(rest).toEqual([]);
    expect(message?.Body).toBe('{"a":1}');
    expect(message?.MessageAttributes?.["agentbus.error_code"]).toMatchObject({
      DataType: "String",
      StringValue: "envelope.invalid",
    });
    expect(message?.MessageAttributes?.["agentbus.error_reason"]?.StringValue).toBe(
      "é".repeat(1000),
    );
  });

  it("keys a FIFO dead-letter queue by group and a hash of the body unless told", async () => {
    const url = await queue("dlq", true);
    const sink = new SqsDeadLetterSink({ client: fromSdk(sqs), queueUrl: url });
    await sink.send({ body: "same", code: "c", reason: "first" });
    await sink.send({ body: "same", code: "c", reason: "second" }); // deduplicated
    await sink.send({
      body: "same",
      code: "c",
      reason: "third",
      groupId: "task_1",
      deduplicationId: "evt-1",
    });
    const received = await drain(url);
    expect(
      received.map((m) => [
        m.Attributes?.MessageGroupId,
        m.MessageAttributes?.["agentbus.error_reason"]?.StringValue,
      ]),
    ).toEqual([
      ["dead-letters", "first"],
      ["task_1", "third"],
    ]);
    expect(received[0]?.Attributes?.MessageDeduplicationId).toMatch(/^[0-9a-f]{64}$/);
    expect(received[1]?.Attributes?.MessageDeduplicationId).toBe("evt-1");
  });

  it("throws TransientError when the queue cannot be reached", async () => {
    const sink = new SqsDeadLetterSink({
      client: fromSdk(sqs),
      queueUrl: `${emulator().endpoint}/123456789012/never-${suffix}`,
    });
    expect(await failureOf(sink.send({ body: "x", code: "c", reason: "r" }))).toMatchObject({
      errorClass: "transient",
    });
  });
});

describe("extendVisibility", () => {
  it("moves a received message's visibility (0 = visible again now)", async () => {
    const url = await queue("visibility");
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "work" }));
    const receive = () =>
      sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, VisibilityTimeout: 60, WaitTimeSeconds: 0 }),
      );
    const first = (await receive()).Messages?.[0];
    expect(first?.ReceiptHandle).toBeDefined();
    expect((await receive()).Messages ?? []).toEqual([]);
    await extendVisibility(fromSdk(sqs), url, first?.ReceiptHandle ?? "", 0);
    const second = (await receive()).Messages?.[0];
    expect(second?.Body).toBe("work");
    await extendVisibility(fromSdk(sqs), url, second?.ReceiptHandle ?? "", 120); // heartbeat
    expect((await receive()).Messages ?? []).toEqual([]);
  });

  it("maps a refused receipt handle to an AgentBusError", async () => {
    const url = await queue("visibility-bad");
    const error = await failureOf(extendVisibility(fromSdk(sqs), url, "not-a-receipt-handle", 30));
    expect(error.code).toMatch(/^sqs\./);
    expect(error.errorClass).toBe("permanent");
  });
});
