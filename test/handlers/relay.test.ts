import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { CreateQueueCommand, ReceiveMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventBridgeV2Client } from "../../functions/adapters/aws/eventbridge-v2";
import { eventItem } from "../../functions/adapters/dynamodb/items";
import { relayFailureKeysOf } from "../../functions/adapters/dynamodb/relay-failure";
import type { SubscriberBusPutEvents } from "../../functions/adapters/eventbridge/subscriber-bus";
import { messageGroupOf } from "../../functions/core/dispatch";
import type { RelayReport } from "../../functions/core/relay";
import { createRelayHandler, type RelayHandlerOptions } from "../../functions/handlers/relay";
import { LOCAL_SERVICE_CREDENTIALS } from "../../lib/dev/local/front-door";
import { LocalSubscriberBuses } from "../../lib/dev/local/runtime/subscriber-buses";
import { serveSubscriberBuses } from "../../lib/dev/local/subscriber-bus-endpoint";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { feedbackEvent, newUlid, taskEvent, taskStream } from "../support/factories";
import { dynamoStreamEvent, dynamoStreamRecord } from "../support/lambda-events";
import { busToQueue } from "../support/queues";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const suffix = newUlid().toLowerCase();
const busName = `hr-events-${suffix}`;
const ruleName = `hr-all-${suffix}`;
let eventbridge: EventBridgeClient;
let sqs: SQSClient;
let queueUrl: string;

let removeBus: () => Promise<void> = async () => {};

beforeAll(async () => {
  eventbridge = new EventBridgeClient(emulator());
  sqs = new SQSClient(emulator());
  const route = await busToQueue(
    eventbridge,
    sqs,
    { bus: busName, rule: ruleName, queue: `hr-target-${suffix}` },
    { source: [{ prefix: "agentbus" }] },
  );
  queueUrl = route.queueUrl;
  removeBus = route.remove;
});

afterAll(async () => {
  await removeBus();
  eventbridge.destroy();
  sqs.destroy();
});

function relayHandler(options: RelayHandlerOptions = {}) {
  return createRelayHandler({
    eventbridge: fromSdk(eventbridge),
    ...options,
    env: options.env ?? { BUS_EVENTS: busName },
  });
}

interface Delivered {
  source: string;
  "detail-type": string;
  detail: Envelope;
}

/** Everything the rule delivered (moto delivers during PutEvents; a few empty rounds to be sure). */
async function drain(): Promise<Delivered[]> {
  const out: Delivered[] = [];
  for (let empty = 0; empty < 2; ) {
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
      }),
    );
    if (!Messages || Messages.length === 0) {
      empty++;
      continue;
    }
    for (const m of Messages) out.push(JSON.parse(m.Body ?? "{}") as Delivered);
  }
  return out;
}

describe("createRelayHandler (events stream -> EventBridge)", () => {
  it("publishes the envelope of each INSERT as the detail of one event, and ignores MODIFY", async () => {
    const [v1, v2] = taskStream(1, 2) as [Envelope, Envelope];
    const feedback = feedbackEvent({ taskId: v1.task_id });
    const modified = taskEvent(3, { taskId: v1.task_id });
    const reports: RelayReport[] = [];
    const event = dynamoStreamEvent([
      dynamoStreamRecord({ ...eventItem(v1) }),
      dynamoStreamRecord({ ...eventItem(modified) }, { eventName: "MODIFY" }),
      dynamoStreamRecord({ ...eventItem(v2) }),
      dynamoStreamRecord({ ...eventItem(feedback) }),
    ]);

    await relayHandler({ onReport: (r) => reports.push(r) })(event);

    expect(reports).toEqual([{ published: 3, skipped: 0, calls: 1, retriedEntries: 0 }]);
    const delivered = await drain();
    expect(delivered.map((d) => d.detail.event_id).sort()).toEqual(
      [v1.event_id, v2.event_id, feedback.event_id].sort(),
    );
    const byId = new Map(delivered.map((d) => [d.detail.event_id, d]));
    for (const envelope of [v1, v2, feedback]) {
      const published = byId.get(envelope.event_id);
      expect(published?.detail).toEqual(JSON.parse(JSON.stringify(envelope)));
      // Its own source, which the rules' `agentbus` prefix matches and the new bus's bridge leaves out.
      expect(published?.source).toBe("agentbus.relay");
      expect(published?.["detail-type"]).toBe(envelope.event_type);
    }
  });

  it("publishes a large envelope stored deflated as the JSON the producer wrote", async () => {
    const large = feedbackEvent({
      payload: { rating: 2, comment: "the reply missed the refund date. ".repeat(40) },
    });
    const item = eventItem(large);
    expect(item.envelope_z).toBeDefined();
    const reports: RelayReport[] = [];

    await relayHandler({ onReport: (r) => reports.push(r) })(
      dynamoStreamEvent([dynamoStreamRecord({ ...item })]),
    );

    expect(reports).toEqual([{ published: 1, skipped: 0, calls: 1, retriedEntries: 0 }]);
    const [published] = await drain();
    expect(published?.detail).toEqual(JSON.parse(JSON.stringify(large)));
  });

  it("leaves the types the stack does not publish (UNPUBLISHED_TYPES) off the bus, and publishes the rest", async () => {
    const [v1, v2] = taskStream(1, 2) as [Envelope, Envelope];
    const feedback = feedbackEvent({ taskId: v1.task_id });
    const reports: RelayReport[] = [];
    const handler = relayHandler({
      env: { BUS_EVENTS: busName, UNPUBLISHED_TYPES: JSON.stringify([v1.event_type]) },
      onReport: (r) => reports.push(r),
    });
    await handler(
      dynamoStreamEvent([v1, v2, feedback].map((e) => dynamoStreamRecord({ ...eventItem(e) }))),
    );
    const left = [v1, v2].filter((e) => e.event_type === v1.event_type);
    expect(reports).toEqual([
      { published: 3 - left.length, skipped: left.length, calls: 1, retriedEntries: 0 },
    ]);
    const delivered = await drain();
    expect(delivered.map((d) => d.detail.event_id).sort()).toEqual(
      [v1, v2, feedback]
        .filter((e) => e.event_type !== v1.event_type)
        .map((e) => e.event_id)
        .sort(),
    );
  });

  it("sends the events a DIRECT_GROUPS group's rule takes to its FIFO queue, keyed by order key and event id, published or not", async () => {
    const fifo = await sqs.send(
      new CreateQueueCommand({
        QueueName: `hr-direct-${suffix}.fifo`,
        Attributes: { FifoQueue: "true" },
      }),
    );
    const failures = await sqs.send(new CreateQueueCommand({ QueueName: `hr-fail-${suffix}` }));
    const [v1, v2] = taskStream(1, 2) as [Envelope, Envelope];
    const feedback = feedbackEvent({ taskId: v1.task_id });
    const reports: RelayReport[] = [];
    const handler = relayHandler({
      sqs: fromSdk(sqs),
      env: {
        BUS_EVENTS: busName,
        RELAY_FAILURE_QUEUE_URL: failures.QueueUrl,
        UNPUBLISHED_TYPES: JSON.stringify([v1.event_type]),
        DIRECT_GROUPS: JSON.stringify([
          {
            group: "projection",
            queue: `hr-direct-${suffix}.fifo`,
            rules: { events: { "detail-type": [v1.event_type, v2.event_type] } },
          },
        ]),
      },
      onReport: (r) => reports.push(r),
    });
    await handler(
      dynamoStreamEvent([v1, v2, feedback].map((e) => dynamoStreamRecord({ ...eventItem(e) }))),
    );
    expect(reports[0]?.direct).toEqual({ delivered: 2, calls: 1, retriedEntries: 0 });
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: fifo.QueueUrl,
        MaxNumberOfMessages: 10,
        MessageSystemAttributeNames: ["MessageGroupId", "MessageDeduplicationId"],
      }),
    );
    expect(
      Messages.map((m) => ({
        body: JSON.parse(m.Body ?? "{}") as unknown,
        group: m.Attributes?.MessageGroupId,
        dedup: m.Attributes?.MessageDeduplicationId,
      })),
    ).toEqual(
      [v1, v2].map((e) => ({
        body: JSON.parse(JSON.stringify(e)),
        group: e.order_key,
        dedup: e.event_id,
      })),
    );
    // The unpublished type went to the group's queue, not to the bus.
    expect((await drain()).map((d) => d.detail.event_id).sort()).toEqual(
      [v1, v2, feedback]
        .filter((e) => e.event_type !== v1.event_type)
        .map((e) => e.event_id)
        .sort(),
    );
  });

  it("sends to a DIRECT_GROUPS group with tenantConcurrency in the tenant's lanes, as its dispatch function does", async () => {
    const queue = `hr-laned-${suffix}.fifo`;
    const fifo = await sqs.send(
      new CreateQueueCommand({ QueueName: queue, Attributes: { FifoQueue: "true" } }),
    );
    const failures = await sqs.send(new CreateQueueCommand({ QueueName: `hr-lfail-${suffix}` }));
    const events = ["acme", "globex"].flatMap((tenant_id) =>
      taskStream(1, 2).map((e) => ({ ...e, tenant_id })),
    );
    const types = [...new Set(events.map((e) => e.event_type))];
    const handler = relayHandler({
      sqs: fromSdk(sqs),
      env: {
        BUS_EVENTS: busName,
        RELAY_FAILURE_QUEUE_URL: failures.QueueUrl,
        UNPUBLISHED_TYPES: JSON.stringify(types),
        DIRECT_GROUPS: JSON.stringify([
          {
            group: "laned",
            queue,
            tenantConcurrency: 2,
            rules: { events: { "detail-type": types } },
          },
        ]),
      },
    });
    await handler(dynamoStreamEvent(events.map((e) => dynamoStreamRecord({ ...eventItem(e) }))));
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: fifo.QueueUrl,
        MaxNumberOfMessages: 10,
        MessageSystemAttributeNames: ["MessageGroupId", "MessageDeduplicationId"],
      }),
    );
    const lanes = new Map(
      Messages.map((m) => [m.Attributes?.MessageDeduplicationId, m.Attributes?.MessageGroupId]),
    );
    expect(lanes.size).toBe(events.length);
    for (const e of events) expect(lanes.get(e.event_id), e.tenant_id).toBe(messageGroupOf(e, 2));
    expect([...lanes.values()].every((g) => /^tenant\/(acme|globex)\/[01]$/.test(g ?? ""))).toBe(
      true,
    ); // Every type went to the group's queue only: the bus got none.
    expect(await drain()).toEqual([]);
  });

  it("refuses a DIRECT_GROUPS group whose tenantConcurrency is not a positive integer, naming it", () => {
    const laned = (tenantConcurrency: unknown) =>
      relayHandler({
        env: {
          BUS_EVENTS: busName,
          DIRECT_GROUPS: JSON.stringify([
            { group: "g", queue: "g.fifo", tenantConcurrency, rules: {} },
          ]),
        },
      });
    expect(() => laned(0)).toThrow(/DIRECT_GROUPS/);
    expect(() => laned(1.5)).toThrow(/DIRECT_GROUPS/);
  });

  it("refuses an UNPUBLISHED_TYPES that is not a JSON array of types, naming it", () => {
    expect(() =>
      relayHandler({ env: { BUS_EVENTS: busName, UNPUBLISHED_TYPES: "workflow.completed" } }),
    ).toThrow(/UNPUBLISHED_TYPES/);
  });

  it("skips an INSERT without an envelope attribute instead of failing the batch", async () => {
    const envelope = taskEvent(1);
    const { envelope: _, ...withoutEnvelope } = eventItem(envelope);
    const reports: RelayReport[] = [];

    await relayHandler({ onReport: (r) => reports.push(r) })(
      dynamoStreamEvent([dynamoStreamRecord(withoutEnvelope)]),
    );

    expect(reports).toEqual([{ published: 0, skipped: 0, calls: 0, retriedEntries: 0 }]);
    expect(await drain()).toEqual([]);
  });

  it("rejects when the bus does not exist, so the stream retries the batch", async () => {
    const handler = relayHandler({ env: { BUS_EVENTS: `hr-missing-${suffix}` } });
    const event = dynamoStreamEvent([dynamoStreamRecord({ ...eventItem(taskEvent(1)) })]);

    await expect(handler(event)).rejects.toMatchObject({
      errorClass: "permanent",
      code: expect.stringMatching(/^eventbridge\./),
    });
    expect(await drain()).toEqual([]);
  });

  it("records the keys of the events it could not publish in the failure queue, then fails", async () => {
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `hr-fail-${suffix}` }));
    const handler = relayHandler({
      env: { BUS_EVENTS: `hr-missing-${suffix}`, RELAY_FAILURE_QUEUE_URL: QueueUrl },
      sqs: fromSdk(sqs),
    });
    const events = taskStream(1, 2);
    const event = dynamoStreamEvent(events.map((e) => dynamoStreamRecord({ ...eventItem(e) })));

    await expect(handler(event)).rejects.toMatchObject({ errorClass: "permanent" });
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }),
    );
    expect(Messages).toHaveLength(1);
    const body = JSON.parse(Messages[0]?.Body ?? "");
    expect(relayFailureKeysOf(body)).toEqual(
      events.map((e) => ({
        pk: `task#${e.aggregate.id}`,
        version: e.aggregate.version,
        eventId: e.event_id,
      })),
    );
    expect(body.relayFailure.error.code).toMatch(/^eventbridge\./);
  });

  it("places an application's event stored without a topic by the stack's types, and records one it cannot place without failing the batch", async () => {
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({ QueueName: `hr-unplaced-${suffix}` }),
    );
    const handler = relayHandler({
      env: {
        BUS_EVENTS: busName,
        RELAY_FAILURE_QUEUE_URL: QueueUrl,
        // What the stack writes from its roles' types (lib/infra/application-types.ts).
        EVENT_TOPICS: JSON.stringify({ events: ["ledgertest.entry_posted"] }),
      },
      sqs: fromSdk(sqs),
    });
    const [v1] = taskStream(1, 1) as [Envelope];
    // Stored before topics were: the hub's type is placed by the registry, the others by type.
    const posted: Envelope = { ...feedbackEvent(), event_type: "ledgertest.entry_posted" };
    const unknown: Envelope = { ...feedbackEvent(), event_type: "ledgertest.unknown" };
    const items = [v1, posted, unknown].map((e) => ({ ...eventItem(e) }));
    expect(items.map((i) => "topic" in i)).toEqual([false, false, false]);

    await handler(dynamoStreamEvent(items.map((item) => dynamoStreamRecord(item))));

    const delivered = await drain();
    expect(delivered.map((d) => d.detail.event_id).sort()).toEqual(
      [v1.event_id, posted.event_id].sort(),
    );
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }),
    );
    expect(Messages).toHaveLength(1);
    const body = JSON.parse(Messages[0]?.Body ?? "");
    expect(relayFailureKeysOf(body)?.map((k) => k.eventId)).toEqual([unknown.event_id]);
    expect(body.relayFailure.error.code).toBe("relay.unknown_type");
    expect(body.relayFailure.error.message).toMatch(/ledgertest\.unknown@1/);
  });

  it("fails an event it cannot place when there is no failure queue to record it in", async () => {
    const unknown: Envelope = { ...feedbackEvent(), event_type: "ledgertest.unknown" };
    const event = dynamoStreamEvent([dynamoStreamRecord({ ...eventItem(unknown) })]);
    await expect(relayHandler()(event)).rejects.toMatchObject({ code: "relay.unknown_type" });
  });

  it("refuses an environment without any BUS_<TOPIC>", () => {
    expect(() => createRelayHandler({ eventbridge: fromSdk(eventbridge), env: {} })).toThrow(
      /relay: invalid environment[\s\S]*at least one BUS_<TOPIC> must be set/,
    );
  });
});

describe('a topic with a new bus (delivery "subscriber")', () => {
  const BUS_V2 = "arn:aws:events:us-east-1:123456789012:event-busv2/hr-events/local";
  const streamOf = (events: readonly Envelope[]) =>
    dynamoStreamEvent(events.map((e) => dynamoStreamRecord({ ...eventItem(e) })));

  it("publishes to both buses with a client for the new one", async () => {
    const calls: SubscriberBusPutEvents[] = [];
    const subscriberBus = {
      putEvents: async (request: SubscriberBusPutEvents) => {
        calls.push(request);
        return { Entries: request.Entries.map(() => ({ SuccessCode: "PUBLISHED" })) };
      },
    };
    const events = taskStream(1, 2);
    await relayHandler({ env: { BUS_EVENTS: busName, BUS_V2_EVENTS: BUS_V2 }, subscriberBus })(
      streamOf(events),
    );
    expect((await drain()).map((d) => d.detail.event_id)).toEqual(events.map((e) => e.event_id));
    expect(calls.map((c) => c.EventBusArn)).toEqual([BUS_V2]);
    expect(calls[0]?.Entries.map((e) => e.SystemMetadata.DeduplicationId)).toEqual(
      events.map((e) => e.event_id),
    );
  });

  it("without a client given, publishes through the eventbridgev2 API: RPC v2 CBOR, signed for events", async () => {
    const buses = new LocalSubscriberBuses({
      buses: [{ logicalId: "EventsBus", name: "hr-events", arn: BUS_V2, retentionDays: 1 }],
      subscribers: [],
      sqs,
      queueUrl: (arn) => arn,
      region: "us-east-1",
      accountId: "123456789012",
    });
    const endpoint = await serveSubscriberBuses({ buses, region: "us-east-1" });
    try {
      const sdk = new EventBridgeClient({
        region: "us-east-1",
        credentials: LOCAL_SERVICE_CREDENTIALS,
      });
      const eventbridgev2 = eventBridgeV2Client(sdk, { endpoint: endpoint.url });
      const events = taskStream(1, 2);
      await relayHandler({ env: { BUS_EVENTS: busName, BUS_V2_EVENTS: BUS_V2 }, eventbridgev2 })(
        streamOf(events),
      );
      expect((await drain()).map((d) => d.detail.event_id)).toEqual(events.map((e) => e.event_id));
      expect(endpoint.calls.map((c) => c.operation)).toEqual(["PutEvents"]);
      expect(endpoint.calls[0]?.headers.authorization).toContain("/us-east-1/events/aws4_request");
      const kept = buses.retainedSince(BUS_V2, 0);
      expect(kept.map((e) => (e.Data.detail as Envelope).event_id)).toEqual(
        events.map((e) => e.event_id),
      );
      expect(kept.map((e) => e.SystemMetadata.EventGroupId)).toEqual(
        events.map((e) => e.order_key),
      );
    } finally {
      await endpoint.stop();
    }
  });
});
