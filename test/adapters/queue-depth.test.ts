import {
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readQueueDepth, sqsQueueDepth } from "../../functions/adapters/sqs/queue-depth";
import { ManualClock } from "../../functions/core/runtime";
import { BacklogGate } from "../../functions/front-door/backlog";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { createQueue } from "../support/queues";

/** The orchestrator's queue-depth source against SQS on moto. */

let sqs: SQSClient;
let writing: string;
let review: string;

beforeAll(async () => {
  sqs = new SQSClient(emulator());
  const suffix = newUlid().toLowerCase();
  writing = await createQueue(sqs, `qd-writing-${suffix}`);
  review = await createQueue(sqs, `qd-review-${suffix}`);
});

afterAll(async () => {
  for (const url of [writing, review])
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
  sqs.destroy();
});

const send = (url: string, n: number) =>
  Promise.all(
    Array.from({ length: n }, (_, i) =>
      sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: `m${i}` })),
    ),
  );

describe("sqsQueueDepth", () => {
  it("counts waiting plus in-flight messages per group; unknown groups are left out; cached", async () => {
    await send(writing, 3);
    await sqs.send(new ReceiveMessageCommand({ QueueUrl: writing, MaxNumberOfMessages: 1 }));
    const clock = new ManualClock();
    const depth = sqsQueueDepth({
      client: fromSdk(sqs),
      queueUrls: { writing, review },
      clock,
      cacheMs: 5000,
    });
    expect(await depth(["writing", "review", "nobody"])).toEqual({ writing: 3, review: 0 });
    await send(review, 2);
    // Within the cache window the old reading stands.
    clock.advance(4000);
    expect(await depth(["review"])).toEqual({ review: 0 });
    clock.advance(2000);
    expect(await depth(["review"])).toEqual({ review: 2 });
  });

  it("a queue that cannot be read counts as 0 and is reported", async () => {
    const errors: string[] = [];
    const depth = sqsQueueDepth({
      client: fromSdk(sqs),
      queueUrls: { gone: `${writing}-does-not-exist` },
      onError: (group) => errors.push(group),
    });
    expect(await depth(["gone"])).toEqual({ gone: 0 });
    expect(errors).toEqual(["gone"]);
  });
});

describe("the front door's backlog gate on readQueueDepth", () => {
  it("refuses while a group's queues hold more than the threshold, and admits a queue it cannot read", async () => {
    const suffix = newUlid().toLowerCase();
    const fifo = await createQueue(sqs, `qd-door-${suffix}`);
    const unread: string[] = [];
    try {
      const client = fromSdk(sqs);
      const gate = new BacklogGate({
        queues: {
          conversations: { conversation: [fifo] },
          runs: { orchestrator: [`${fifo}-does-not-exist`] },
        },
        read: (url) => readQueueDepth(client, url),
        clock: new ManualClock(),
        settings: { threshold: 2, drainPerSecond: 1, cacheSeconds: 0 },
        onUnread: (url) => unread.push(url),
      });
      await send(fifo, 2);
      expect(await gate.refusal("conversations")).toBeUndefined();
      await send(fifo, 3);
      expect(await gate.refusal("conversations")).toMatchObject({
        code: "backlog",
        retryAfterSeconds: 3,
      });
      expect(await gate.refusal("runs")).toBeUndefined();
      expect(unread).toEqual([`${fifo}-does-not-exist`]);
    } finally {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: fifo })).catch(() => undefined);
    }
  });
});
