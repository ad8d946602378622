import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  EventBridgeClient,
  InternalException,
} from "@aws-sdk/client-eventbridge";
import { ReceiveMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventBridgePublisher } from "../../functions/adapters/eventbridge/publisher";
import type { AgentBusError } from "../../functions/core/errors";
import { relay } from "../../functions/core/relay";
import { meter } from "../../lib/dev/metering/metering";
import { fromSdk } from "../../lib/operator/from-sdk";
import { type Envelope, registry } from "../../schemas";
import { emulator } from "../support/aws";
import { feedbackEvent, newUlid, taskStream } from "../support/factories";
import { busToQueue } from "../support/queues";

const suffix = newUlid().toLowerCase();
const busName = `agentbus-events-${suffix}`;
const ruleName = `all-agentbus-${suffix}`;
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
    { bus: busName, rule: ruleName, queue: `eb-target-${suffix}` },
    { source: ["agentbus"] },
  );
  queueUrl = route.queueUrl;
  removeBus = route.remove;
});

afterAll(async () => {
  await removeBus();
  eventbridge.destroy();
  sqs.destroy();
});

interface Delivered {
  source: string;
  "detail-type": string;
  time: string | number;
  detail: Envelope;
}

async function drain(expected: number): Promise<Delivered[]> {
  const out: Delivered[] = [];
  for (let round = 0; round < 20 && out.length < expected; round++) {
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
      }),
    );
    for (const m of Messages ?? []) out.push(JSON.parse(m.Body ?? "{}") as Delivered);
  }
  return out;
}

async function failureOf(promise: Promise<unknown>): Promise<AgentBusError> {
  try {
    await promise;
  } catch (error) {
    return error as AgentBusError;
  }
  throw new Error("expected the call to fail");
}

describe("EventBridgePublisher", () => {
  it("puts each envelope as the detail of one event, in one call, and a rule delivers it", async () => {
    const own = new EventBridgeClient(emulator());
    const metered = meter(own);
    const publisher = new EventBridgePublisher({
      client: fromSdk(own),
      buses: { events: busName },
    });
    const envelopes = [...taskStream(1, 2), feedbackEvent()];
    expect(await publisher.publish("events", envelopes)).toEqual([]);
    expect(metered.snapshot().calls).toEqual({ PutEvents: 1 });

    const delivered = await drain(3);
    const byId = new Map(delivered.map((d) => [d.detail.event_id, d]));
    for (const envelope of envelopes) {
      const event = byId.get(envelope.event_id);
      expect(event?.detail).toEqual(JSON.parse(JSON.stringify(envelope)));
      expect(event?.source).toBe("agentbus");
      expect(event?.["detail-type"]).toBe(envelope.event_type);
      // EventBridge keeps whole seconds of Time ("2026-03-01T12:00:00Z").
      const time = event?.time;
      const ms = typeof time === "number" ? time * 1000 : Date.parse(time ?? "");
      expect(Math.floor(ms / 1000)).toBe(Math.floor(Date.parse(envelope.occurred_at) / 1000));
    }
    own.destroy();
  });

  it("returns per-entry failures by index and delivers the rest", async () => {
    const publisher = new EventBridgePublisher({
      client: fromSdk(eventbridge),
      buses: { events: busName },
    });
    const [good, other] = taskStream(1, 2) as [Envelope, Envelope];
    // An empty detail-type is refused per entry (InvalidArgument).
    const bad = { ...other, event_type: "" } as Envelope;
    const failures = await publisher.publish("events", [bad, good]);
    expect(failures).toEqual([
      { eventId: bad.event_id, code: "InvalidArgument", message: expect.any(String) },
    ]);
    const delivered = await drain(1);
    expect(delivered.map((d) => d.detail.event_id)).toEqual([good.event_id]);
  });

  it("refuses a topic without a bus, and a missing bus, permanently", async () => {
    const publisher = new EventBridgePublisher({
      client: fromSdk(eventbridge),
      buses: { events: `missing-${suffix}` },
    });
    const envelopes = taskStream(1, 1);
    expect(await failureOf(publisher.publish("commands", envelopes))).toMatchObject({
      code: "eventbridge.no_bus",
      errorClass: "permanent",
    });
    expect(await failureOf(publisher.publish("events", envelopes))).toMatchObject({
      code: "eventbridge.resource_not_found",
      errorClass: "permanent",
    });
    expect(await publisher.publish("commands", [])).toEqual([]);
  });

  it("throws TransientError when the whole call is throttled or fails on the server", async () => {
    const own = new EventBridgeClient({ ...emulator(), maxAttempts: 1 });
    let fault: Error = Object.assign(new Error("Rate exceeded"), {
      name: "ThrottlingException",
      $fault: "client",
      $metadata: { httpStatusCode: 400 },
    });
    own.middlewareStack.add(
      () => async () => {
        throw fault;
      },
      { step: "initialize", name: "fault" },
    );
    const publisher = new EventBridgePublisher({
      client: fromSdk(own),
      buses: { events: busName },
    });
    expect(await failureOf(publisher.publish("events", taskStream(1, 1)))).toMatchObject({
      code: "eventbridge.throttled",
      errorClass: "transient",
    });
    fault = new InternalException({ message: "boom", $metadata: { httpStatusCode: 500 } });
    expect(await failureOf(publisher.publish("events", taskStream(1, 1)))).toMatchObject({
      code: "eventbridge.unavailable",
      errorClass: "transient",
    });
    own.destroy();
  });

  it("serves the core relay end to end", async () => {
    // A bus without rules: moto spends about 0.25 s per event delivered to an SQS target, and
    // delivery is covered above; this checks the relay's batching through the real publisher.
    const quiet = `agentbus-quiet-${suffix}`;
    await eventbridge.send(new CreateEventBusCommand({ Name: quiet }));
    const own = new EventBridgeClient(emulator());
    const metered = meter(own);
    const publisher = new EventBridgePublisher({ client: fromSdk(own), buses: { events: quiet } });
    const report = await relay(taskStream(1, 12), registry, publisher);
    expect(report).toMatchObject({ published: 12, calls: 2, retriedEntries: 0 });
    expect(metered.snapshot().calls).toEqual({ PutEvents: 2 });
    own.destroy();
    await eventbridge.send(new DeleteEventBusCommand({ Name: quiet }));
  });
});
