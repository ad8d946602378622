import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
  DeleteQueueCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { SQSRecord } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoTraceReader } from "../../functions/adapters/dynamodb/trace-reader";
import { DEAD_LETTER_ATTRIBUTES } from "../../functions/adapters/sqs/dead-letter-sink";
import { messageGroupOf } from "../../functions/core/dispatch";
import { createDispatchHandler, type DispatchOptions } from "../../functions/handlers/dispatch";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { feedbackEvent, newUlid, taskEvent, taskStream } from "../support/factories";
import {
  eventBridgeEnvelope,
  queueArnOf,
  sqsEvent,
  sqsRecord,
  sqsRecordFromMessage,
} from "../support/lambda-events";
import { createQueue, drainQueue } from "../support/queues";
import { createTables, deleteTables } from "../support/tables";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const suffix = newUlid().toLowerCase();
let sqs: SQSClient;
let bufferUrl: string;
let targetUrl: string;
let deadLetterUrl: string;
const queues: string[] = [];

async function queue(name: string, fifo = false): Promise<string> {
  const url = await createQueue(sqs, `${name}-${suffix}`, fifo);
  queues.push(url);
  return url;
}

beforeAll(async () => {
  sqs = new SQSClient(emulator());
  // The buffer queue only gives the records their source ARN: the handler never reads it.
  bufferUrl = await queue("hd-buffer");
  targetUrl = await queue("hd-group", true);
  deadLetterUrl = await queue("hd-buffer-dlq");
});

afterAll(async () => {
  for (const url of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
  sqs.destroy();
});

function dispatcher(options: DispatchOptions & { env?: Record<string, string | undefined> } = {}) {
  return createDispatchHandler({
    sqs: fromSdk(sqs),
    ...options,
    env: {
      GROUP_NAME: "task-projection",
      TARGET_QUEUE_URL: targetUrl,
      DEAD_LETTER_QUEUE_URL: deadLetterUrl,
      ...options.env,
    },
  });
}

/** A buffer-queue record: what a rule's SQS target delivers (standard queue, no group). */
const bufferRecord = (body: string) => sqsRecord({ body, queueArn: queueArnOf(bufferUrl) });
const delivered = (envelope: unknown) =>
  bufferRecord(JSON.stringify(eventBridgeEnvelope(envelope)));

const drain = (url: string) => drainQueue(sqs, url);

const ids = (records: readonly SQSRecord[]) =>
  records.map((r) => ({ itemIdentifier: r.messageId }));

describe("createDispatchHandler (buffer queue -> FIFO queue)", () => {
  it("sends each envelope to the FIFO queue keyed by order key and event id", async () => {
    const [p1, p2] = taskStream(1, 2) as [Envelope, Envelope];
    const q1 = taskEvent(1);
    // An explicit order key wins over the aggregate id.
    const keyed = feedbackEvent({ taskId: q1.task_id });
    const ordered = { ...keyed, order_key: "conversation-7" };
    const records = [delivered(p1), delivered(q1), delivered(p2), delivered(ordered)];
    const reports: unknown[] = [];

    const response = await dispatcher({ onReport: (r) => reports.push(r) })(sqsEvent(records));

    expect(response.batchItemFailures).toEqual([]);
    expect(reports).toEqual([{ sent: 4, deadLettered: 0, calls: 1, failedRecordIds: [] }]);
    const messages = await drain(targetUrl);
    const byId = new Map(messages.map((m) => [JSON.parse(m.Body ?? "{}").event_id, m]));
    expect(messages).toHaveLength(4);
    for (const envelope of [p1, q1, p2, ordered]) {
      const message = byId.get(envelope.event_id);
      expect(message?.Attributes).toEqual({
        MessageGroupId: envelope.order_key,
        MessageDeduplicationId: envelope.event_id,
      });
      // The body is the envelope alone (the EventBridge wrapper is gone).
      expect(JSON.parse(message?.Body ?? "{}")).toEqual(envelope);
    }
    expect(byId.get(ordered.event_id)?.Attributes?.MessageGroupId).toBe("conversation-7");
    // One group, in order.
    expect(
      messages
        .filter((m) => m.Attributes?.MessageGroupId === p1.order_key)
        .map((m) => JSON.parse(m.Body ?? "{}").event_id),
    ).toEqual([p1.event_id, p2.event_id]);
  });

  it("keeps an archive replay's mark: the event around the envelope, a deduplication id of its own", async () => {
    const envelope = feedbackEvent({});
    const live = eventBridgeEnvelope(envelope);
    const replayed = { ...eventBridgeEnvelope(envelope), "replay-name": "agentbus-t-events-r" };
    // Within the queue's five-minute dedup window of the live delivery: not swallowed.
    await dispatcher()(sqsEvent([bufferRecord(JSON.stringify(live))]));
    await dispatcher()(sqsEvent([bufferRecord(JSON.stringify(replayed))]));
    const messages = await drain(targetUrl);
    expect(messages).toHaveLength(2);
    const [first, second] = messages.map((m) => ({
      body: JSON.parse(m.Body ?? "{}"),
      dedup: m.Attributes?.MessageDeduplicationId,
    }));
    expect(first).toEqual({ body: envelope, dedup: envelope.event_id });
    expect(second?.dedup).toMatch(new RegExp(`^${envelope.event_id}-[0-9a-f]{16}$`));
    expect(second?.body).toMatchObject({
      "detail-type": envelope.event_type,
      time: live.time,
      "replay-name": "agentbus-t-events-r",
      detail: envelope,
    });
  });

  it("dead-letters bodies that are not EventBridge events and invalid envelopes, without failing them", async () => {
    const good = taskEvent(1);
    const notJson = bufferRecord("<not json>");
    const notAnEvent = bufferRecord(JSON.stringify({ hello: "world" }));
    const invalid = delivered({ ...good, event_type: "Not A Type", event_id: newUlid() });
    const unknown = delivered({ ...good, schema_version: 9, event_id: newUlid() });
    // A type the hub does not know (an application's) goes on: its consumer validates it.
    const foreign = { ...good, event_type: "ledger.entry_recorded", event_id: newUlid() };
    const records = [notJson, notAnEvent, invalid, unknown, delivered(foreign), delivered(good)];

    const response = await dispatcher()(sqsEvent(records));

    expect(response.batchItemFailures).toEqual([]);
    const sent = await drain(targetUrl);
    expect(sent.map((m) => JSON.parse(m.Body ?? "{}").event_id)).toEqual([
      foreign.event_id,
      good.event_id,
    ]);
    const dead = await drain(deadLetterUrl);
    const codes = new Map(
      dead.map((m) => [m.Body, m.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue]),
    );
    expect(codes).toEqual(
      new Map([
        [notJson.body, "dispatch.not_an_event"],
        [notAnEvent.body, "dispatch.not_an_event"],
        [invalid.body, "envelope.invalid"],
        [unknown.body, "envelope.unsupported_version"],
      ]),
    );
    for (const m of dead)
      expect(m.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.reason]?.StringValue).not.toBe("");
  });

  it("records each dead letter that carries the ids a trace needs, when given the inbox table", async () => {
    const dynamodb = new DynamoDBClient(emulator());
    const tables = await createTables(dynamodb, `hd-${suffix}`);
    try {
      const good = taskEvent(1);
      const unknown = delivered({ ...good, schema_version: 9, event_id: newUlid() });
      const invalidId = { ...good, event_id: newUlid(), payload: { title: 7 } };
      const response = await dispatcher({
        dynamodb: fromSdk(dynamodb),
        env: { INBOX_TABLE: tables.inbox },
      })(sqsEvent([bufferRecord("<not json>"), unknown, delivered(invalidId)]));
      expect(response.batchItemFailures).toEqual([]);
      await drain(deadLetterUrl);
      const trace = new DynamoTraceReader({ client: fromSdk(dynamodb), tables });
      const recorded = await trace.outcomesByTask(good.task_id);
      expect(recorded.map((r) => [r.eventId, r.outcome, "error" in r ? r.error.code : ""])).toEqual(
        expect.arrayContaining([
          [
            JSON.parse(unknown.body).detail.event_id,
            "dead-lettered",
            "envelope.unsupported_version",
          ],
          [invalidId.event_id, "dead-lettered", "envelope.invalid_payload"],
        ]),
      );
      expect(recorded).toHaveLength(2);
    } finally {
      await deleteTables(dynamodb, tables);
      dynamodb.destroy();
    }
  });

  it("hands the records back to the buffer queue when the FIFO queue cannot be reached", async () => {
    const [v1, v2] = taskStream(1, 2) as [Envelope, Envelope];
    const records = [delivered(v1), bufferRecord("nope"), delivered(v2)];
    const handler = dispatcher({
      env: { TARGET_QUEUE_URL: targetUrl.replace("hd-group", "hd-missing") },
    });

    const response = await handler(sqsEvent(records));

    const [first, invalid, second] = records as [SQSRecord, SQSRecord, SQSRecord];
    expect(response.batchItemFailures).toEqual(ids([first, second]));
    const dead = await drain(deadLetterUrl);
    expect(dead.map((m) => m.Body)).toEqual([invalid.body]);
  });

  it("hands back only the record whose dead-letter send failed; the rest of the batch goes on", async () => {
    const good = taskEvent(1);
    const notAnEvent = bufferRecord(JSON.stringify({ hello: "world" }));
    const invalid = delivered({ ...good, schema_version: 9, event_id: newUlid() });
    const handler = dispatcher({
      env: { DEAD_LETTER_QUEUE_URL: deadLetterUrl.replace("hd-buffer-dlq", "hd-missing-dlq") },
    });

    const response = await handler(sqsEvent([notAnEvent, invalid, delivered(good)]));

    expect(response.batchItemFailures).toEqual(ids([invalid, notAnEvent]));
    const sent = await drain(targetUrl);
    expect(sent.map((m) => JSON.parse(m.Body ?? "{}").event_id)).toEqual([good.event_id]);
  });

  it("brings records it could not send back after a short backoff, not the visibility timeout", async () => {
    const source = await queue("hd-source");
    const [v1] = taskStream(1, 1) as [Envelope];
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: source,
        MessageBody: JSON.stringify(eventBridgeEnvelope(v1)),
      }),
    );
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: source,
        VisibilityTimeout: 300,
        WaitTimeSeconds: 2,
        MessageSystemAttributeNames: ["All"],
      }),
    );
    expect(Messages).toHaveLength(1);
    const handler = dispatcher({
      env: {
        TARGET_QUEUE_URL: targetUrl.replace("hd-group", "hd-missing"),
        SOURCE_QUEUE_URL: source,
        RETRY_BASE_SECONDS: "1",
      },
    });

    const record = sqsRecordFromMessage(Messages[0] as Message, source);
    const response = await handler(sqsEvent([record]));

    expect(response.batchItemFailures).toEqual(ids([record]));
    // Visible again within seconds (1 s backoff on the first receive), not after 300 s.
    const again = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: source, WaitTimeSeconds: 5 }),
    );
    expect(again.Messages?.map((m) => m.MessageId)).toEqual([Messages[0]?.MessageId]);
  });

  it("with TENANT_CONCURRENCY, a tenant's backlog holds at most that many groups: the next receive is another tenant's", async () => {
    const fair = await queue("hd-fair", true);
    // Tenant A's 12 conversations (over both of its lanes), then tenant B's one message.
    const backlog = Array.from({ length: 12 }, (_, i) => ({
      ...feedbackEvent({}),
      tenant_id: "tenant-a",
      order_key: `conv_a${i}`,
    }));
    expect(new Set(backlog.map((e) => messageGroupOf(e, 2))).size).toBe(2);
    const quiet = { ...feedbackEvent({}), tenant_id: "tenant-b", order_key: "conv_b" };
    const dispatch = dispatcher({ env: { TARGET_QUEUE_URL: fair, TENANT_CONCURRENCY: "2" } });
    await dispatch(sqsEvent(backlog.slice(0, 10).map(delivered)));
    await dispatch(sqsEvent([...backlog.slice(10), quiet].map(delivered)));

    // Two consumer invocations of batch size 1 (reply generation's) each hold one of A's lanes…
    const receive = async () => {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: fair,
          MaxNumberOfMessages: 1,
          VisibilityTimeout: 30,
          MessageSystemAttributeNames: ["MessageGroupId"],
        }),
      );
      return Messages.map((m) => m.Attributes?.MessageGroupId);
    };
    const held = [...(await receive()), ...(await receive())];
    expect(new Set(held)).toEqual(new Set(["tenant/tenant-a/0", "tenant/tenant-a/1"]));
    // …so a third finds none of A's ten older messages available, and takes B's.
    expect(await receive()).toEqual([messageGroupOf(quiet, 2)]);
  });

  it("names a missing environment variable", () => {
    expect(() => createDispatchHandler({ sqs: fromSdk(sqs), env: { GROUP_NAME: "g" } })).toThrow(
      /dispatch: invalid environment[\s\S]*TARGET_QUEUE_URL[\s\S]*DEAD_LETTER_QUEUE_URL/,
    );
  });
});
