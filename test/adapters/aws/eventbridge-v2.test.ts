import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { eventBridgeV2Client } from "../../../functions/adapters/aws/eventbridge-v2";
import {
  AwsSubscriberBusClient,
  SubscriberBusPublisher,
  subscriberBusEntry,
} from "../../../functions/adapters/eventbridge/subscriber-bus";
import { LOCAL_SERVICE_CREDENTIALS } from "../../../lib/dev/local/front-door";
import { LocalSubscriberBuses } from "../../../lib/dev/local/runtime/subscriber-buses";
import {
  type SubscriberBusAnswer,
  type SubscriberBusCall,
  type SubscriberBusEndpoint,
  serveSubscriberBuses,
} from "../../../lib/dev/local/subscriber-bus-endpoint";
import { checkSubscriberRetention, startSubscriberReplay } from "../../../lib/operator/replay";
import { planSubscriberReplays, replayTargets } from "../../../lib/operator/replay-plan";
import { taskStream } from "../../support/factories";

/**
 * The `eventbridgev2` client (Smithy RPC v2 CBOR on an SDK EventBridge client's credentials and
 * retries; no SDK for JavaScript client to compare with) against the local endpoint on 127.0.0.1,
 * which refuses what the service would (a path, header or signature not as the protocol has them)
 * and serves the local runtime's emulation.
 */

const REGION = "us-east-1";
const BUS =
  "arn:aws:events:us-east-1:123456789012:event-busv2/t-events/local0000000000000000000000";
const LIVE =
  "arn:aws:events:us-east-1:123456789012:subscriber/t-task-projection/local0000000000000000000000";

let buses: LocalSubscriberBuses;
let endpoint: SubscriberBusEndpoint;
/** What the endpoint answers next instead of the emulation (one answer per call, in order). */
let answers: SubscriberBusAnswer[] = [];

beforeAll(async () => {
  buses = new LocalSubscriberBuses({
    // Created half an hour into the replay window below, which the emulation's clock is just past.
    buses: [
      {
        logicalId: "EventsBus",
        name: "t-events",
        arn: BUS,
        retentionDays: 1,
        createdAt: Date.parse("2026-12-01T10:30:00Z"),
      },
    ],
    now: () => Date.parse("2026-12-01T11:30:00Z"),
    subscribers: [
      {
        logicalId: "TaskProjectionSubscriber",
        name: "t-task-projection",
        busArn: BUS,
        fifo: true,
        patterns: [{ "detail-type": ["no.such.type"] }],
        targetArn: "arn:aws:sqs:us-east-1:123456789012:t-task-projection.fifo",
        messageGroupId: "{% $events.Data.detail.order_key %}",
        messageDeduplicationId: "{% $events.Data.detail.event_id %}",
        maxRetryAttempts: 5,
      },
    ],
    // Nothing is delivered: the subscriber's filter selects no event of these tests.
    sqs: undefined as unknown as SQSClient,
    queueUrl: (arn) => arn,
    region: REGION,
    accountId: "123456789012",
  });
  endpoint = await serveSubscriberBuses({
    buses,
    region: REGION,
    intercept: () => answers.shift(),
  });
});

afterAll(async () => {
  await endpoint?.stop();
  for (const sdk of lenders) sdk.destroy();
});

afterEach(() => {
  answers = [];
});

const lenders: EventBridgeClient[] = [];

/** An SDK EventBridge client (the test's credentials and region), destroyed after the tests. */
function lender(config: ConstructorParameters<typeof EventBridgeClient>[0] = {}) {
  const sdk = new EventBridgeClient({
    region: REGION,
    credentials: LOCAL_SERVICE_CREDENTIALS,
    ...config,
  });
  lenders.push(sdk);
  return sdk;
}

const client = (options: { credentials?: { accessKeyId: string; secretAccessKey: string } } = {}) =>
  eventBridgeV2Client(lender(options.credentials ? { credentials: options.credentials } : {}), {
    endpoint: endpoint.url,
  });
const callsSince = (n: number): SubscriberBusCall[] => endpoint.calls.slice(n);

describe("eventbridgev2 on the SDK's credentials, retries and codec", () => {
  it("resolves the host names the AWS SDK for Rust's endpoint rules do (regional, FIPS, dual-stack), on the SDK's partitions", async () => {
    const hostOf = async (region: string, config = {}, env = {}) => {
      const sdk = lender({ region, ...config });
      const hosts: string[] = [];
      const requestHandler = {
        handle: async (request: { hostname: string }) => {
          hosts.push(request.hostname);
          throw Object.assign(new Error("not sent"), { name: "NotSent" });
        },
      };
      Object.assign(sdk.config, { requestHandler });
      await eventBridgeV2Client(sdk, { env })
        .send({ service: "eventsv2", operation: "PutEvents", input: {} })
        .catch(() => undefined);
      return hosts[0];
    };
    expect(await hostOf("us-east-1")).toBe("eventsv2.us-east-1.amazonaws.com");
    expect(await hostOf("us-east-1", { useFipsEndpoint: true })).toBe(
      "eventsv2-fips.us-east-1.amazonaws.com",
    );
    expect(await hostOf("us-gov-west-1", { useFipsEndpoint: true })).toBe(
      "eventsv2-fips.us-gov-west-1.amazonaws.com",
    );
    expect(await hostOf("us-east-1", { useDualstackEndpoint: true })).toBe(
      "eventsv2.us-east-1.api.aws",
    );
    expect(await hostOf("cn-north-1")).toBe("eventsv2.cn-north-1.amazonaws.com.cn");
    expect(
      await hostOf("eu-west-1", {}, { AWS_ENDPOINT_URL_EVENTBRIDGEV2: "http://127.0.0.1:1" }),
    ).toBe("127.0.0.1");
  });

  it("publishes as RPC v2 CBOR signed for events: the entries, their time as a timestamp, their event group", async () => {
    const before = endpoint.calls.length;
    const events = taskStream(1, 2);
    const entries = events.map(subscriberBusEntry);
    const result = await new AwsSubscriberBusClient(client()).putEvents({
      EventBusArn: BUS,
      Entries: entries,
    });
    expect(result.Entries?.map((e) => e.SuccessCode)).toEqual(["PUBLISHED", "PUBLISHED"]);
    expect(result).not.toHaveProperty("$metadata");
    const [call] = callsSince(before) as [SubscriberBusCall];
    expect(call.operation).toBe("PutEvents");
    expect(call.headers).toMatchObject({
      "smithy-protocol": "rpc-v2-cbor",
      "content-type": "application/cbor",
      accept: "application/cbor",
    });
    expect(call.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=testing\/\d{8}\/us-east-1\/events\/aws4_request/,
    );
    expect(call.input).toEqual({ EventBusArn: BUS, Entries: entries });
    expect((call.input.Entries as { Time: unknown }[])[0]?.Time).toBeInstanceOf(Date);
    const again = await new AwsSubscriberBusClient(client()).putEvents({
      EventBusArn: BUS,
      Entries: entries.slice(0, 1),
    });
    expect(again.Entries?.map((e) => e.SuccessCode)).toEqual(["DEDUPLICATED"]);
  });

  it("is what a function sends it through: an EventBridge client with the SDK's defaults lends its credential chain and region", async () => {
    vi.stubEnv("AWS_REGION", REGION);
    vi.stubEnv("AWS_ACCESS_KEY_ID", "testing");
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", "testing");
    vi.stubEnv("AWS_ENDPOINT_URL_EVENTBRIDGEV2", endpoint.url);
    const sdk = new EventBridgeClient();
    try {
      const before = endpoint.calls.length;
      const result = await new AwsSubscriberBusClient(eventBridgeV2Client(sdk)).putEvents({
        EventBusArn: BUS,
        Entries: taskStream(1, 1).map(subscriberBusEntry),
      });
      expect(result.Entries?.map((e) => e.SuccessCode)).toEqual(["PUBLISHED"]);
      expect(callsSince(before).map((c) => c.operation)).toEqual(["PutEvents"]);
    } finally {
      sdk.destroy();
      vi.unstubAllEnvs();
    }
  });

  it("reads per-entry failures, aligned with the entries by index", async () => {
    const events = taskStream(1, 3);
    answers = [
      {
        status: 200,
        body: {
          FailedEntryCount: 1,
          Entries: [
            { EventId: "a", SuccessCode: "PUBLISHED" },
            { ErrorCode: "InternalFailure", ErrorMessage: "try again" },
            { EventId: "c", SuccessCode: "DEDUPLICATED" },
          ],
        },
      },
    ];
    const publisher = new SubscriberBusPublisher(new AwsSubscriberBusClient(client()), {
      events: BUS,
    });
    expect(await publisher.publish("events", events)).toEqual([
      { eventId: events[1]?.event_id, code: "InternalFailure", message: "try again" },
    ]);
  });

  it("retries a ThrottlingException and a server fault, as the SDK's standard retry strategy does", async () => {
    const before = endpoint.calls.length;
    answers = [
      {
        status: 400,
        body: { __type: "com.amazonaws.eventsv2#ThrottlingException", message: "Rate exceeded" },
      },
      { status: 500, body: { __type: "InternalException", message: "Internal failure" } },
    ];
    const sent = await client().send({
      service: "eventsv2",
      operation: "PutEvents",
      input: { EventBusArn: BUS, Entries: taskStream(1, 1).map(subscriberBusEntry) },
    });
    expect(sent.$metadata.attempts).toBe(3);
    expect(callsSince(before)).toHaveLength(3);
  });

  it("names a refusal by its __type, without retrying it; refuses a request not signed as the service requires", async () => {
    const missing = client().send({
      service: "eventsv2",
      operation: "PutEvents",
      input: { EventBusArn: `${BUS}x`, Entries: [] },
    });
    await expect(missing).rejects.toMatchObject({
      name: "ResourceNotFoundException",
      $fault: "client",
      $metadata: { httpStatusCode: 400, attempts: 1 },
    });
    const forged = client({ credentials: { accessKeyId: "testing", secretAccessKey: "other" } });
    await expect(
      forged.send({ service: "eventsv2", operation: "PutEvents", input: { EventBusArn: BUS } }),
    ).rejects.toMatchObject({
      name: "InvalidSignatureException",
      $metadata: { httpStatusCode: 403 },
    });
    const unsigned = await fetch(`${endpoint.url}/service/AWSEventsV2/operation/PutEvents`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(unsigned.status).toBe(400);
  });
});

describe("a point-in-time replay subscriber through eventbridgev2, signed with the SDK's credential chain", () => {
  const window = { from: new Date("2026-12-01T10:00:00Z"), to: new Date("2026-12-01T11:00:00.5Z") };
  const [plan] = planSubscriberReplays(
    "t",
    replayTargets({ TaskProjectionEventsSubscriberArn: LIVE }, ["events"], ["task-projection"]),
    ["task-projection"],
    window,
  );

  it("describes the live subscriber, creates its copy over the window once, and finds it the second time", async () => {
    if (!plan) throw new Error("no plan");
    const v2 = eventBridgeV2Client(lender(), { endpoint: endpoint.url });
    const before = endpoint.calls.length;
    const first = await startSubscriberReplay(v2, plan, window);
    expect(first).toMatchObject({ outcome: "started", state: "RUNNING" });
    expect(first.subscriberArn).toContain(`:subscriber/${plan.name}/`);
    const calls = callsSince(before);
    expect(calls.map((c) => c.operation)).toEqual([
      "DescribeSubscriber",
      "ListSubscribers",
      "DescribeEventBus",
      "CreateSubscriber",
    ]);
    const create = calls[3]?.input as Record<string, Record<string, unknown>>;
    expect(create).toMatchObject({
      Name: plan.name,
      EventBusArn: BUS,
      Type: "FIFO",
      StartingPosition: "POINT_IN_TIME",
      PointInTimeConfiguration: {
        PointType: "TIMESTAMP",
        // The bus's retention window starts at its creation: the service refuses an earlier point.
        StartingPoint: new Date("2026-12-01T10:30:00Z"),
        EndPoint: new Date("2026-12-01T11:00:01Z"),
      },
      InvokeConfiguration: {
        TargetArn: "arn:aws:sqs:us-east-1:123456789012:t-task-projection.fifo",
        SqsParameters: { MessageGroupId: "{% $events.Data.detail.order_key %}" },
      },
    });
    expect(create.ClientToken).toMatch(/^[0-9a-f]{64}$/);
    expect(create).not.toHaveProperty("SubscriberArn");
    expect(create).not.toHaveProperty("State");
    const second = await startSubscriberReplay(v2, plan, window);
    expect(second).toMatchObject({ outcome: "existing", subscriberArn: first.subscriberArn });
    expect(callsSince(before).filter((c) => c.operation === "CreateSubscriber")).toHaveLength(1);
  });

  it("refuses a window older than the bus keeps, from DescribeEventBus", async () => {
    if (!plan) throw new Error("no plan");
    const v2 = client();
    const hourLater = new Date(window.to.getTime() + 3_600_000);
    await expect(checkSubscriberRetention(v2, [plan], window, hourLater)).resolves.toBeUndefined();
    const daysLater = new Date(window.to.getTime() + 3 * 86_400_000);
    await expect(checkSubscriberRetention(v2, [plan], window, daysLater)).rejects.toThrow(
      /--from 2026-12-01T10:00:00.000Z is outside the retention of new bus t-events \(1 days/,
    );
  });
});
