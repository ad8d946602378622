import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient, type PutEventsCommandInput } from "@aws-sdk/client-eventbridge";
import {
  type ChangeMessageVisibilityBatchCommandInput,
  type ChangeMessageVisibilityCommandInput,
  DeleteMessageCommand,
  DeleteQueueCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import type { SQSRecord } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { type StateItem, storedStateOf } from "../../functions/adapters/dynamodb/items";
import { streamKey, type TableNames } from "../../functions/adapters/dynamodb/tables";
import { DynamoTraceReader } from "../../functions/adapters/dynamodb/trace-reader";
import { DEAD_LETTER_ATTRIBUTES } from "../../functions/adapters/sqs/dead-letter-sink";
import { TransientError } from "../../functions/core/errors";
import { appendToStream } from "../../functions/core/producer";
import type { Role } from "../../functions/core/role";
import { type ConsumerOptions, createConsumerHandler } from "../../functions/handlers/consumer";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { fromSdk } from "../../lib/operator/from-sdk";
import { type Envelope, registry } from "../../schemas";
import { emulator } from "../support/aws";
import {
  feedbackEvent,
  newCorrelationId,
  newTaskId,
  newUlid,
  taskEvent,
  taskStream,
} from "../support/factories";
import { queueArnOf, sqsEvent, sqsRecord, sqsRecordFromMessage } from "../support/lambda-events";
import { createQueue } from "../support/queues";
import { createTables, deleteTables } from "../support/tables";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const suffix = newUlid().toLowerCase();
let dynamodb: DynamoDBClient;
let sqs: SQSClient;
let tables: TableNames;
let queueUrl: string;
let deadLetterUrl: string;
let trace: DynamoTraceReader;
const queues: string[] = [];

async function fifoQueue(name: string): Promise<string> {
  const url = await createQueue(sqs, `${name}-${suffix}`, true);
  queues.push(url);
  return url;
}

/** A FIFO queue whose messages go to its own FIFO dead-letter queue after 3 receives. */
async function limitedQueue(name: string): Promise<{ dlq: string; limited: string }> {
  const dlq = await fifoQueue(`${name}-dlq`);
  const limited = await fifoQueue(name);
  await sqs.send(
    new SetQueueAttributesCommand({
      QueueUrl: limited,
      Attributes: {
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: queueArnOf(dlq), maxReceiveCount: 3 }),
      },
    }),
  );
  return { dlq, limited };
}

beforeAll(async () => {
  dynamodb = new DynamoDBClient(emulator());
  sqs = new SQSClient(emulator());
  tables = await createTables(dynamodb, `hc-${suffix}`);
  trace = new DynamoTraceReader({ client: fromSdk(dynamodb), tables });
  queueUrl = await fifoQueue("hc-group");
  deadLetterUrl = await fifoQueue("hc-group-dlq");
});

afterAll(async () => {
  await deleteTables(dynamodb, tables);
  for (const url of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
  dynamodb.destroy();
  sqs.destroy();
});

/** The environment the stack gives the task-projection consumer. */
function consumerEnv(overrides: Record<string, string | undefined> = {}) {
  return {
    GROUP_NAME: taskProjection.group,
    STATE_TABLE: tables.state,
    EVENTS_TABLE: tables.events,
    INBOX_TABLE: tables.inbox,
    SIDE_EFFECTS_TABLE: tables.sideEffects,
    QUEUE_URL: queueUrl,
    DEAD_LETTER_QUEUE_URL: deadLetterUrl,
    INBOX_TTL_DAYS: "7",
    RETRY_BASE_SECONDS: "2",
    RETRY_MAX_SECONDS: "60",
    ...overrides,
  };
}

function consumer(options: ConsumerOptions = {}) {
  return createConsumerHandler(taskProjection, {
    dynamodb: fromSdk(dynamodb),
    sqs: fromSdk(sqs),
    ...options,
    env: consumerEnv(options.env),
  });
}

/** The record the dispatcher's message becomes: group = order key, deduplication id = event id. */
function recordOf(envelope: Envelope, extra: Partial<Parameters<typeof sqsRecord>[0]> = {}) {
  return sqsRecord({
    body: JSON.stringify(envelope),
    groupId: envelope.order_key,
    deduplicationId: envelope.event_id,
    queueArn: queueArnOf(queueUrl),
    ...extra,
  });
}

async function viewOf(taskId: string): Promise<TaskView | undefined> {
  const { Item } = await dynamodb.send(
    new GetItemCommand({
      TableName: tables.state,
      Key: { pk: { S: streamKey({ type: "task_view", id: taskId }) } },
      ConsistentRead: true,
    }),
  );
  return Item ? (storedStateOf(unmarshall(Item) as StateItem).data as TaskView) : undefined;
}

/** An SQS client whose ChangeMessageVisibility calls are recorded (they still go to moto). */
function spiedSqs() {
  const client = new SQSClient(emulator());
  const visibility: ChangeMessageVisibilityCommandInput[] = [];
  const released: ChangeMessageVisibilityBatchCommandInput[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === "ChangeMessageVisibilityCommand")
        visibility.push(args.input as ChangeMessageVisibilityCommandInput);
      if (context.commandName === "ChangeMessageVisibilityBatchCommand")
        released.push(args.input as ChangeMessageVisibilityBatchCommandInput);
      return next(args);
    },
    { step: "initialize", name: "spy-visibility" },
  );
  return { client, visibility, released };
}

async function receive(url: string, visibilityTimeout?: number): Promise<Message[]> {
  const { Messages } = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 0,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["All"],
      ...(visibilityTimeout !== undefined ? { VisibilityTimeout: visibilityTimeout } : {}),
    }),
  );
  return Messages ?? [];
}

/** Receive and delete until the queue is empty (FIFO: a group's next message shows after delete). */
async function drain(url: string): Promise<Message[]> {
  const out: Message[] = [];
  for (let empty = 0; empty < 2; ) {
    const messages = await receive(url);
    if (messages.length === 0) {
      empty++;
      continue;
    }
    for (const m of messages) {
      out.push(m);
      await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));
    }
  }
  return out;
}

const ids = (records: readonly SQSRecord[]) =>
  records.map((r) => ({ itemIdentifier: r.messageId }));

describe("createConsumerHandler (task projection, SQS FIFO)", () => {
  it("holds back the rest of a failing message group, in order, and applies the other groups", async () => {
    // Group A: version 3 of a task whose versions 1-2 are nowhere -> gate.gap_unrepairable.
    const [, , a3, a4] = taskStream(1, 4) as [Envelope, Envelope, Envelope, Envelope];
    const [b1, b2] = taskStream(1, 2) as [Envelope, Envelope];
    const recA3 = recordOf(a3);
    const recA4 = recordOf(a4);
    const recB1 = recordOf(b1);
    const recB2 = recordOf(b2);
    const { client, visibility, released } = spiedSqs();
    const outcomes: string[] = [];
    const handler = consumer({
      sqs: fromSdk(client),
      observer: {
        consumed: (r) => outcomes.push(`${r.status} v${r.event.aggregate.version}`),
        failed: (f) => outcomes.push(f.error.code),
      },
    });

    const response = await handler(sqsEvent([recA3, recB1, recA4, recB2]));

    expect(response.batchItemFailures).toEqual(ids([recA3, recA4]));
    // A4 was never handed to the pipeline: the processor failed it because A3 failed.
    expect(outcomes).toEqual(["gate.gap_unrepairable", "applied v1", "applied v2"]);
    expect(await viewOf(a3.aggregate.id)).toBeUndefined();
    const b = await viewOf(b1.aggregate.id);
    expect(b).toMatchObject({ status: "planned", version: 2 });
    expect(b?.history.map((h) => h.event_id)).toEqual([b1.event_id, b2.event_id]);
    // The transient failure asked for its backoff (the fake receipt handle is refused by SQS,
    // which the handler only logs).
    expect(visibility).toEqual([
      { QueueUrl: queueUrl, ReceiptHandle: recA3.receiptHandle, VisibilityTimeout: 2 },
    ]);
    // A4, skipped behind A3, is released at once so group A resumes when A3's backoff ends
    // (left in flight it would hold the group back for the whole visibility timeout).
    expect(released).toEqual([
      {
        QueueUrl: queueUrl,
        Entries: [{ Id: "0", ReceiptHandle: recA4.receiptHandle, VisibilityTimeout: 0 }],
      },
    ]);
    client.destroy();
  });

  it("dead-letters unparsable bodies and invalid envelopes with their code, without failing them", async () => {
    const dlq = await fifoQueue("hc-invalid-dlq");
    const good = taskEvent(1);
    const invalid = JSON.stringify({ ...good, event_id: "not-a-ulid", aggregate: undefined });
    const notJson = sqsRecord({ body: "{ this is not json", groupId: "client-42" });
    const badEnvelope = sqsRecord({
      body: invalid,
      groupId: good.order_key,
      deduplicationId: "d-1",
    });
    const after = recordOf(good);
    const handler = consumer({ env: { DEAD_LETTER_QUEUE_URL: dlq } });

    const response = await handler(sqsEvent([notJson, badEnvelope, after]));

    expect(response.batchItemFailures).toEqual([]);
    // A permanent failure does not hold back its group: the next event of the task was applied.
    expect(await viewOf(good.aggregate.id)).toMatchObject({ status: "accepted", version: 1 });
    const dead = await drain(dlq);
    const byBody = new Map(dead.map((m) => [m.Body, m]));
    expect(dead).toHaveLength(2);
    const code = (m: Message | undefined) =>
      m?.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue;
    const reason = (m: Message | undefined) =>
      m?.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.reason]?.StringValue;
    expect(code(byBody.get(notJson.body))).toBe("envelope.not_json");
    expect(reason(byBody.get(notJson.body))).toBe("message body is not JSON");
    expect(byBody.get(notJson.body)?.Attributes?.MessageGroupId).toBe("client-42");
    expect(code(byBody.get(invalid))).toBe("envelope.invalid");
    expect(reason(byBody.get(invalid))).toMatch(/event_id|aggregate/);
    expect(byBody.get(invalid)?.Attributes).toMatchObject({
      MessageGroupId: good.order_key,
      MessageDeduplicationId: "d-1",
    });
  });

  it("leaves a permanent failure whose dead-letter send failed on its queue, back after the backoff", async () => {
    const dlq = deadLetterUrl.replace("hc-group-dlq", "hc-never-created-dlq");
    const notJson = sqsRecord({ body: "{ this is not json", groupId: "client-43" });
    const good = recordOf(taskEvent(1));
    const { client, visibility } = spiedSqs();
    const handler = consumer({
      sqs: fromSdk(client),
      env: { DEAD_LETTER_QUEUE_URL: dlq, RETRY_BASE_SECONDS: "1" },
    });

    const response = await handler(sqsEvent([notJson, good]));

    expect(response.batchItemFailures).toEqual(ids([notJson]));
    expect(visibility.at(-1)).toMatchObject({
      ReceiptHandle: notJson.receiptHandle,
      VisibilityTimeout: 1,
    });
  });

  it("dead-letters a transient failure on the queue's last receive, with its last error", async () => {
    const { dlq, limited } = await limitedQueue("hc-limited");
    // Version 3 of a task whose versions 1-2 are nowhere: gate.gap_unrepairable, transient.
    const [, , orphan] = taskStream(1, 3) as [Envelope, Envelope, Envelope];
    const failures: string[] = [];
    const handler = consumer({
      env: { QUEUE_URL: limited, DEAD_LETTER_QUEUE_URL: dlq },
      observer: { failed: (f) => failures.push(`${f.outcome} ${f.receiveCount}`) },
    });

    const second = recordOf(orphan, { receiveCount: 2 });
    expect((await handler(sqsEvent([second]))).batchItemFailures).toEqual(ids([second]));
    expect(await drain(dlq)).toHaveLength(0);
    // The trace sees the failure: retrying, with its last error and attempt.
    const outcomes = () => trace.outcomesOfEvent([taskProjection.group], orphan.event_id);
    expect(await outcomes()).toEqual([
      expect.objectContaining({
        group: taskProjection.group,
        outcome: "retrying",
        attempts: 2,
        error: expect.objectContaining({ code: "gate.gap_unrepairable" }),
        correlationId: orphan.correlation_id,
        taskId: orphan.task_id,
        causationId: orphan.causation_id,
        version: 3,
      }),
    ]);

    const last = recordOf(orphan, { receiveCount: 3 });
    expect((await handler(sqsEvent([last]))).batchItemFailures).toEqual([]);
    expect(failures).toEqual(["retrying 2", "dead-lettered 3"]);
    expect(await trace.outcomesByTask(orphan.task_id)).toEqual([
      expect.objectContaining({ outcome: "dead-lettered", attempts: 3 }),
    ]);
    const [dead, ...more] = await drain(dlq);
    expect(more).toHaveLength(0);
    expect(dead?.Body).toBe(last.body);
    const attribute = (name: string) => dead?.MessageAttributes?.[name]?.StringValue;
    expect(attribute(DEAD_LETTER_ATTRIBUTES.code)).toBe("gate.gap_unrepairable");
    expect(attribute(DEAD_LETTER_ATTRIBUTES.reason)).toMatch(/version 3 arrived after 0/);
    expect(attribute(DEAD_LETTER_ATTRIBUTES.receiveCount)).toBe("3");
    expect(dead?.Attributes).toMatchObject({
      MessageGroupId: orphan.order_key,
      MessageDeduplicationId: orphan.event_id,
    });
  });

  it("holds a message that waits for a state's version, with its group, then dead-letters it as a timeout", async () => {
    const { dlq, limited } = await limitedQueue("hc-waits");
    const handler = consumer({ env: { QUEUE_URL: limited, DEAD_LETTER_QUEUE_URL: dlq } });
    const store = new DynamoEventStore({ client: fromSdk(dynamodb), tables });
    const clock = { now: () => new Date() };
    const deps = { store, registry, clock, ids: { next: newUlid } };
    const prerequisite = newTaskId();
    const writeStep = () =>
      appendToStream(deps, {
        aggregate: { type: "task", id: prerequisite },
        producer: "task-api",
        correlationId: newCorrelationId(),
        taskId: prerequisite,
        decide: () => ({ emit: [{ type: "task.accepted", payload: { title: "t" } }] }),
      });
    await writeStep(); // the prerequisite's state at version 1
    const waits = {
      ...feedbackEvent({ rating: 5 }),
      required_version: { type: "task", id: prerequisite, version: 2 },
    };
    const behind = feedbackEvent({ taskId: waits.task_id, rating: 1 });

    // Held, and the message behind it in its FIFO group with it; nothing applied.
    const first = [recordOf(waits), recordOf(behind)];
    expect((await handler(sqsEvent(first))).batchItemFailures).toEqual(ids(first));
    expect(await viewOf(waits.task_id)).toBeUndefined();

    // The queue's last receive, the state still behind: a permanent timeout in the dead letter.
    const last = recordOf(waits, { receiveCount: 3 });
    expect((await handler(sqsEvent([last]))).batchItemFailures).toEqual([]);
    const [dead] = await drain(dlq);
    const attribute = (name: string) => dead?.MessageAttributes?.[name]?.StringValue;
    expect(attribute(DEAD_LETTER_ATTRIBUTES.code)).toBe("ordering.required_version_timeout");
    expect(attribute(DEAD_LETTER_ATTRIBUTES.reason)).toContain(
      `task/${prerequisite} to reach version 2, still at version 1`,
    );

    // Once the state reaches the version, the message (redriven) is applied, read from DynamoDB.
    await writeStep();
    const redriven = recordOf(waits, { receiveCount: 1 });
    expect((await handler(sqsEvent([redriven]))).batchItemFailures).toEqual([]);
    expect((await viewOf(waits.task_id))?.feedback).toEqual({ count: 1, rating_total: 5 });
  });

  it("records no retry of a type its role repeats idempotently, only its dead letter", async () => {
    const { dlq, limited } = await limitedQueue("hc-repeat");
    const [created] = taskStream(1, 1) as [Envelope];
    // Nothing records such a message when it applies: a retry's record would be all a trace
    // showed of one that applied next time.
    const repeating = {
      ...taskProjection,
      repeatableTypes: [created.event_type],
      decide: () => Promise.reject(new TransientError("store.throttled", "slow down")),
    } as unknown as Role<TaskView>;
    const handler = createConsumerHandler(repeating, {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(sqs),
      env: consumerEnv({ QUEUE_URL: limited, DEAD_LETTER_QUEUE_URL: dlq }),
    });
    const outcomes = () => trace.outcomesOfEvent([taskProjection.group], created.event_id);

    const second = recordOf(created, { receiveCount: 2 });
    expect((await handler(sqsEvent([second]))).batchItemFailures).toEqual(ids([second]));
    expect(await outcomes()).toEqual([]);

    const last = recordOf(created, { receiveCount: 3 });
    expect((await handler(sqsEvent([last]))).batchItemFailures).toEqual([]);
    expect(await outcomes()).toEqual([
      expect.objectContaining({ outcome: "dead-lettered", attempts: 3 }),
    ]);
    expect(await drain(dlq)).toHaveLength(1);
  });

  it("commits a role's failure facts on the queue's last receive instead of dead-lettering", async () => {
    const { dlq, limited } = await limitedQueue("hc-failed");
    const failing = {
      ...taskProjection,
      decide: () => Promise.reject(new TransientError("model.throttled", "slow down")),
      failed: (_state: unknown, _event: Envelope, failure: { code: string }) => ({
        state: { failed_with: failure.code },
      }),
    } as unknown as Role<TaskView>;
    const handler = createConsumerHandler(failing, {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(sqs),
      env: consumerEnv({ QUEUE_URL: limited, DEAD_LETTER_QUEUE_URL: dlq }),
    });
    const [created] = taskStream(1, 1) as [Envelope];

    const second = recordOf(created, { receiveCount: 2 });
    expect((await handler(sqsEvent([second]))).batchItemFailures).toEqual(ids([second]));
    expect(await viewOf(created.task_id)).toBeUndefined();

    const last = recordOf(created, { receiveCount: 3 });
    expect((await handler(sqsEvent([last]))).batchItemFailures).toEqual([]);
    expect(await viewOf(created.task_id)).toEqual({ failed_with: "model.throttled" });
    expect(await trace.inboxRecords(taskProjection.group, [created.event_id])).toEqual([
      expect.objectContaining({ outcome: "rejected", reason: "model.throttled" }),
    ]);
    expect(await drain(dlq)).toHaveLength(0);
  });

  it("applies an envelope delivered twice in one batch once (sequenced and unsequenced)", async () => {
    const accepted = taskEvent(1);
    const feedback = feedbackEvent({ taskId: accepted.aggregate.id, rating: 4 });
    const statuses: string[] = [];
    const handler = consumer({
      observer: {
        consumed: (r) => statuses.push(r.status),
        failed: (f) => statuses.push(f.error.code),
      },
    });
    // A redelivery: same body and deduplication id, another message id and receipt handle.
    const records = [
      recordOf(accepted),
      recordOf(accepted, { receiveCount: 2 }),
      recordOf(feedback),
      recordOf(feedback, { receiveCount: 2 }),
    ];

    const response = await handler(sqsEvent(records));

    expect(response.batchItemFailures).toEqual([]);
    expect(statuses).toEqual(["applied", "duplicate", "applied", "duplicate"]);
    const view = await viewOf(accepted.aggregate.id);
    expect(view?.history.map((h) => h.event_id)).toEqual([accepted.event_id]);
    expect(view?.feedback).toEqual({ count: 1, rating_total: 4 });
  });

  it("refuses a GROUP_NAME that is not the role's group, naming both", () => {
    expect(() => consumer({ env: { GROUP_NAME: "billing" } })).toThrow(
      /GROUP_NAME is billing but the handler's role is task-projection/,
    );
  });

  it("names every missing or malformed environment variable", () => {
    const build = (overrides: Record<string, string | undefined>) => () =>
      createConsumerHandler(taskProjection, {
        dynamodb: fromSdk(dynamodb),
        sqs: fromSdk(sqs),
        env: consumerEnv(overrides),
      });
    expect(build({ STATE_TABLE: undefined })).toThrow(/consumer task-projection[\s\S]*STATE_TABLE/);
    let message = "";
    try {
      build({ INBOX_TABLE: undefined, QUEUE_URL: "not a url" })();
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("INBOX_TABLE");
    expect(message).toContain("QUEUE_URL");
    expect(message).not.toContain("EVENTS_TABLE");
  });

  it("backs a transient failure off through the message's visibility, doubling up to the cap", async () => {
    const url = await fifoQueue("hc-retry");
    // Version 2 of a task whose version 1 is nowhere: retried until it shows up.
    const gapped = taskEvent(2);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: JSON.stringify(gapped),
        MessageGroupId: gapped.order_key,
        MessageDeduplicationId: gapped.event_id,
      }),
    );
    const { client, visibility } = spiedSqs();
    const handler = consumer({
      sqs: fromSdk(client),
      env: { QUEUE_URL: url, RETRY_BASE_SECONDS: "1", RETRY_MAX_SECONDS: "3" },
    });

    // First delivery, received with a long visibility timeout: the handler shortens it to 1 s.
    const [first] = await receive(url, 60);
    if (!first) throw new Error("the message was not received");
    const firstRecord = sqsRecordFromMessage(first, url);
    expect(firstRecord.attributes.ApproximateReceiveCount).toBe("1");
    expect((await handler(sqsEvent([firstRecord]))).batchItemFailures).toEqual(ids([firstRecord]));
    expect(visibility.at(-1)).toMatchObject({
      ReceiptHandle: first.ReceiptHandle,
      VisibilityTimeout: 1,
    });
    expect(await receive(url)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 1_300));

    // Second delivery, well before the 60 s it was received with: backoff 1 * 2^(2-1) = 2 s.
    const [second] = await receive(url, 60);
    if (!second) throw new Error("the message did not come back after its backoff");
    const secondRecord = sqsRecordFromMessage(second, url);
    expect(secondRecord.messageId).toBe(firstRecord.messageId);
    expect(secondRecord.attributes.ApproximateReceiveCount).toBe("2");
    expect((await handler(sqsEvent([secondRecord]))).batchItemFailures).toEqual(
      ids([secondRecord]),
    );
    expect(visibility.at(-1)).toMatchObject({
      ReceiptHandle: second.ReceiptHandle,
      VisibilityTimeout: 2,
    });
    expect(await receive(url)).toEqual([]);

    // The fifth delivery would wait 1 * 2^4 = 16 s: capped at RETRY_MAX_SECONDS.
    const fifth = {
      ...secondRecord,
      attributes: { ...secondRecord.attributes, ApproximateReceiveCount: "5" },
    };
    await handler(sqsEvent([fifth]));
    expect(visibility.map((v) => v.VisibilityTimeout)).toEqual([1, 2, 3]);
    client.destroy();
  });
});

/** An EventBridge client that records PutEvents inputs and answers them itself (or fails). */
function fakeEventBridge(fail = false) {
  const client = new EventBridgeClient(emulator());
  const puts: PutEventsCommandInput[] = [];
  client.middlewareStack.add(
    () => async (args) => {
      puts.push(args.input as PutEventsCommandInput);
      if (fail) throw Object.assign(new Error("bus is down"), { $fault: "server" });
      return {
        output: { $metadata: {}, FailedEntryCount: 0, Entries: [{ EventId: "1" }] },
        response: {},
      } as never;
    },
    { step: "initialize", name: "fake-put-events" },
  );
  return { client, puts };
}

/**
 * The task projection's subscriptions, but a decision that takes `ms` and a heartbeat (renewing a
 * lease of `leaseSeconds` when given, else sent at every tick).
 */
function slowRole(ms: number, leaseSeconds?: number): Role<unknown> & { decided: number } {
  const role = {
    group: taskProjection.group,
    subscriptions: taskProjection.subscriptions,
    decided: 0,
    async decide() {
      await new Promise((resolve) => setTimeout(resolve, ms));
      role.decided++;
      return {};
    },
    heartbeat(event: Envelope) {
      return {
        type: "node.heartbeat",
        payload: { run_id: "run_beat1", node_id: "writing", generation: 2, lease_seconds: 120 },
        aggregate: { type: "dag_run", id: "run_beat1" },
        orderKey: event.order_key,
        ...(leaseSeconds === undefined ? {} : { leaseSeconds }),
      };
    },
  };
  return role;
}

describe("heartbeat", () => {
  async function received(name: string) {
    const url = await fifoQueue(name);
    const envelope = taskEvent(1);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: JSON.stringify(envelope),
        MessageGroupId: envelope.order_key,
        MessageDeduplicationId: envelope.event_id,
      }),
    );
    const [message] = await receive(url, 30);
    if (!message) throw new Error("the message was not received");
    return { url, envelope, record: sqsRecordFromMessage(message, url) };
  }

  /** A consumer of `role` whose heartbeat ticks every 0.3 s, its SQS and its bus spied on. */
  function beating(url: string, role: Role<unknown>, visibilitySeconds: number) {
    const { client, visibility } = spiedSqs();
    const bus = fakeEventBridge();
    const handler = createConsumerHandler(role, {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(client),
      eventbridge: fromSdk(bus.client),
      env: consumerEnv({
        QUEUE_URL: url,
        HEARTBEAT_SECONDS: "0.3",
        VISIBILITY_TIMEOUT_SECONDS: String(visibilitySeconds),
        EVENTS_BUS_NAME: "agentbus-test-events",
      }),
    });
    const close = () => {
      client.destroy();
      bus.client.destroy();
    };
    return { handler, visibility, puts: bus.puts, close };
  }

  it("a slow decision is acknowledged at once, then gets its message visibility extended once half of it has passed since the receive and a heartbeat without a lease at every tick, until it is done", async () => {
    const { url, envelope, record } = await received("hc-beat");
    const role = slowRole(1_100);
    const { handler, visibility, puts, close } = beating(url, role, 1);
    const started = Date.now();
    const response = await handler(sqsEvent([record]));
    // At least the decision's 1.1 s; more on a busy machine, with more ticks in it.
    const elapsed = Date.now() - started;
    expect(response.batchItemFailures).toEqual([]);
    expect(role.decided).toBe(1);
    // Ticks about 0.3 s apart while the record is handled; the visibility (1 s) is set again at the
    // first tick half a second past the receive, then half a second past that: at most once per
    // half second, never at every tick.
    expect(visibility.length).toBeGreaterThanOrEqual(1);
    expect(visibility.length).toBeLessThanOrEqual(Math.floor(elapsed / 500));
    for (const v of visibility)
      expect(v).toMatchObject({
        QueueUrl: url,
        ReceiptHandle: record.receiptHandle,
        VisibilityTimeout: 1,
      });
    // The acknowledgement (published as the record enters the pipeline), then one per tick.
    const beats = puts.length - 1;
    expect(beats).toBeGreaterThanOrEqual(2);
    expect(beats).toBeLessThanOrEqual(Math.floor(elapsed / 300));
    const entry = puts[0]?.Entries?.[0];
    expect(entry).toMatchObject({
      EventBusName: "agentbus-test-events",
      DetailType: "node.heartbeat",
    });
    const beat = JSON.parse(entry?.Detail ?? "{}") as Envelope;
    expect(beat).toMatchObject({
      event_type: "node.heartbeat",
      producer: taskProjection.group,
      causation_id: envelope.event_id,
      correlation_id: envelope.correlation_id,
      aggregate: { type: "dag_run", id: "run_beat1", version: 0 },
      payload: { run_id: "run_beat1", node_id: "writing", generation: 2, lease_seconds: 120 },
    });
    // The timer stopped with the record.
    const after = { extended: visibility.length, puts: puts.length };
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect({ extended: visibility.length, puts: puts.length }).toEqual(after);
    close();
  });

  it("a message received again does not say when: the first tick extends its visibility, the next ones not before half of it has passed", async () => {
    const { url, record } = await received("hc-again");
    const again = {
      ...record,
      attributes: { ...record.attributes, ApproximateReceiveCount: "2" },
    };
    const { handler, visibility, puts, close } = beating(url, slowRole(1_100, 120), 45);
    expect((await handler(sqsEvent([again]))).batchItemFailures).toEqual([]);
    expect(visibility).toEqual([
      expect.objectContaining({ ReceiptHandle: record.receiptHandle, VisibilityTimeout: 45 }),
    ]);
    // The 120 s lease: nothing but the acknowledgement.
    expect(puts).toHaveLength(1);
    close();
  });

  it("a heartbeat that renews a lease goes again only once half of the lease has passed; a visibility far from half gone is not extended", async () => {
    const cases = [
      // A 1 s lease: renewed at the first tick past 0.5 s after the acknowledgement, then at most
      // once per half second the record takes (1.1 s, more on a busy machine).
      { leaseSeconds: 1, least: 1, most: (elapsed: number) => Math.floor(elapsed / 500) },
      // A 120 s lease: nothing but the acknowledgement while the record is handled.
      { leaseSeconds: 120, least: 0, most: () => 0 },
    ];
    for (const [index, { leaseSeconds, least, most: mostIn }] of cases.entries()) {
      const { url, record } = await received(`hc-lease${index}`);
      const { handler, visibility, puts, close } = beating(url, slowRole(1_100, leaseSeconds), 45);
      const started = Date.now();
      expect((await handler(sqsEvent([record]))).batchItemFailures).toEqual([]);
      const most = mostIn(Date.now() - started);
      expect(visibility).toEqual([]);
      const beats = puts.length - 1;
      expect({ leaseSeconds, atLeast: beats >= least, atMost: beats <= most }).toEqual({
        leaseSeconds,
        atLeast: true,
        atMost: true,
      });
      close();
    }
  });

  it("a record handed out for the third time (ApproximateReceiveCount 3) emits and beats with attempt 3", async () => {
    const url = await fifoQueue("hc-attempt");
    const envelope = taskEvent(1);
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: JSON.stringify(envelope),
        MessageGroupId: envelope.order_key,
        MessageDeduplicationId: envelope.event_id,
      }),
    );
    // Two receives that let the message go again at once; the queue's own count reaches 3.
    await receive(url, 0);
    await receive(url, 0);
    const [third] = await receive(url, 30);
    if (!third) throw new Error("the message was not received a third time");
    const record = sqsRecordFromMessage(third, url);
    expect(record.attributes.ApproximateReceiveCount).toBe("3");
    const bus = fakeEventBridge();
    const planView = { type: "plan_view", id: envelope.aggregate.id };
    const role: Role<unknown> = {
      ...slowRole(50),
      stateOf: () => planView,
      decide: () => ({
        state: { planned: true },
        emit: [{ type: "answer.generated", payload: { answer_ref: "ans_3" } }],
      }),
    };
    const handler = createConsumerHandler(role, {
      dynamodb: fromSdk(dynamodb),
      eventbridge: fromSdk(bus.client),
      env: consumerEnv({
        QUEUE_URL: url,
        HEARTBEAT_SECONDS: "5",
        EVENTS_BUS_NAME: "agentbus-test-events",
      }),
    });
    expect((await handler(sqsEvent([record]))).batchItemFailures).toEqual([]);
    const beat = JSON.parse(bus.puts[0]?.Entries?.[0]?.Detail ?? "{}") as Envelope;
    expect(beat.attempt).toBe(3);
    const store = new DynamoEventStore({ client: fromSdk(dynamodb), tables });
    const [emitted] = await store.readStream(planView, 1, 1);
    expect([emitted?.event_type, emitted?.attempt, emitted?.causation_id]).toEqual([
      "answer.generated",
      3,
      envelope.event_id,
    ]);
    bus.client.destroy();
  });

  it("a heartbeat goes straight to the queues of the groups whose rules take it, as their dispatch function sends it, and onto the bus only when the stack names it", async () => {
    const { url, envelope, record } = await received("hc-beat-direct");
    const orchestratorUrl = await fifoQueue("hc-beat-orchestrator");
    const auditUrl = await createQueue(sqs, `hc-beat-audit-${suffix}`);
    queues.push(auditUrl);
    const nameOf = (u: string) => u.slice(u.lastIndexOf("/") + 1);
    const beats = { "detail-type": ["node.started", "node.heartbeat"] };
    const targets = [
      { group: "orchestrator", queue: nameOf(orchestratorUrl), rules: { events: beats } },
      {
        group: "audit",
        queue: nameOf(auditUrl),
        rules: { events: { ...beats, detail: { aggregate: { version: [0] } } } },
        unordered: true,
      },
      // Its rule does not take node.heartbeat: it gets nothing (its queue does not even exist).
      {
        group: "run-board",
        queue: "hc-no-such-queue.fifo",
        rules: { events: { "detail-type": ["node.started"] } },
      },
    ];
    const bus = fakeEventBridge();
    const options = (env: Record<string, string>) => ({
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(sqs),
      eventbridge: fromSdk(bus.client),
      env: consumerEnv({
        QUEUE_URL: url,
        HEARTBEAT_SECONDS: "5",
        HEARTBEAT_TARGETS: JSON.stringify(targets),
        ...env,
      }),
    });
    const handler = createConsumerHandler(slowRole(50), options({}));
    expect((await handler(sqsEvent([record]))).batchItemFailures).toEqual([]);
    expect(bus.puts).toEqual([]);
    const [fifo] = await receive(orchestratorUrl, 30);
    const beat = JSON.parse(fifo?.Body ?? "{}") as Envelope;
    expect(beat).toMatchObject({
      event_type: "node.heartbeat",
      causation_id: envelope.event_id,
      aggregate: { type: "dag_run", id: "run_beat1", version: 0 },
    });
    expect(fifo?.Attributes?.MessageGroupId).toBe(beat.order_key);
    expect(fifo?.Attributes?.MessageDeduplicationId).toBe(beat.event_id);
    const [kept] = await receive(auditUrl, 30);
    expect(JSON.parse(kept?.Body ?? "{}")).toEqual(beat);

    // A group fed by the bus takes heartbeats too (EVENTS_BUS_NAME set): published there as well.
    const again = await received("hc-beat-both");
    const both = createConsumerHandler(
      slowRole(50),
      options({ QUEUE_URL: again.url, EVENTS_BUS_NAME: "agentbus-test-events" }),
    );
    expect((await both(sqsEvent([again.record]))).batchItemFailures).toEqual([]);
    const published = JSON.parse(bus.puts[0]?.Entries?.[0]?.Detail ?? "{}") as Envelope;
    expect(published.causation_id).toBe(again.envelope.event_id);
    const [second] = await receive(orchestratorUrl, 30);
    expect((JSON.parse(second?.Body ?? "{}") as Envelope).event_id).toBe(published.event_id);
    bus.client.destroy();
  });

  it("a heartbeat a group's queue refuses is logged and never fails the record; the other groups still get it", async () => {
    const { url, record } = await received("hc-beat-refused");
    const auditUrl = await createQueue(sqs, `hc-beat-kept-${suffix}`);
    queues.push(auditUrl);
    const rules = { events: { "detail-type": ["node.heartbeat"] } };
    const handler = createConsumerHandler(slowRole(50), {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(sqs),
      env: consumerEnv({
        QUEUE_URL: url,
        HEARTBEAT_SECONDS: "5",
        HEARTBEAT_TARGETS: JSON.stringify([
          { group: "gone", queue: `hc-beat-gone-${suffix}.fifo`, rules },
          {
            group: "audit",
            queue: auditUrl.slice(auditUrl.lastIndexOf("/") + 1),
            rules,
            unordered: true,
          },
        ]),
      }),
    });
    expect((await handler(sqsEvent([record]))).batchItemFailures).toEqual([]);
    const [kept] = await receive(auditUrl, 30);
    expect((JSON.parse(kept?.Body ?? "{}") as Envelope).event_type).toBe("node.heartbeat");
  });

  it("a failing heartbeat is logged, never fails the record and is tried again at the next tick; no heartbeat without HEARTBEAT_SECONDS", async () => {
    const failing = await received("hc-beat-fail");
    const { client, visibility } = spiedSqs();
    const bus = fakeEventBridge(true);
    // A 120 s lease: delivered, the acknowledgement would be the only beat within 0.8 s.
    const handler = createConsumerHandler(slowRole(800, 120), {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(client),
      eventbridge: fromSdk(bus.client),
      env: consumerEnv({
        QUEUE_URL: failing.url,
        HEARTBEAT_SECONDS: "0.2",
        VISIBILITY_TIMEOUT_SECONDS: "45",
        EVENTS_BUS_NAME: "agentbus-test-events",
      }),
    });
    expect((await handler(sqsEvent([failing.record]))).batchItemFailures).toEqual([]);
    // The acknowledgement, then a beat at each tick (about 0.2, 0.4 and 0.6 s) while none went out.
    expect(bus.puts.length).toBeGreaterThanOrEqual(3);

    const quiet = await received("hc-beat-off");
    const before = visibility.length;
    const off = createConsumerHandler(slowRole(600), {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(client),
      eventbridge: fromSdk(bus.client),
      env: consumerEnv({ QUEUE_URL: quiet.url, EVENTS_BUS_NAME: "agentbus-test-events" }),
    });
    const puts = bus.puts.length;
    expect((await off(sqsEvent([quiet.record]))).batchItemFailures).toEqual([]);
    expect(visibility.length).toBe(before);
    expect(bus.puts.length).toBe(puts);
    client.destroy();
    bus.client.destroy();
  });
});
