import { context, propagation, trace } from "@opentelemetry/api";
import * as semconv from "@opentelemetry/semantic-conventions/incubating";
import type { APIGatewayProxyEventV2WithJWTAuthorizer } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AwsClient, AwsCommand } from "../../functions/adapters/aws/client";
import { eventItem } from "../../functions/adapters/dynamodb/items";
import { InMemoryModelControls } from "../../functions/core/model-guard";
import type { StoredState } from "../../functions/core/ports";
import { ManualClock } from "../../functions/core/runtime";
import { parseTraceparent } from "../../functions/core/trace-context";
import { InMemoryAcceptedRequests } from "../../functions/front-door/accepted";
import { InMemoryClientSequences } from "../../functions/front-door/client-seq";
import { InMemoryTenantLimits } from "../../functions/front-door/limits";
import { InMemoryRunsInFlight } from "../../functions/front-door/runs-in-flight";
import { decodeDelivery, messageIdsOf } from "../../functions/handlers/consumer-record";
import { createDispatchHandler } from "../../functions/handlers/dispatch";
import { createFrontDoorHandler } from "../../functions/handlers/front-door";
import {
  continuedBy,
  HOP_ATTRIBUTES,
  MESSAGING_SYSTEMS,
  tracedPublisher,
} from "../../functions/handlers/hop-spans";
import { createRelayHandler } from "../../functions/handlers/relay";
import { createSweeperHandler } from "../../functions/handlers/sweeper";
// The reference roles' event types in the registry: the refund review's decision, which a sweep sends.
import "../../functions/roles/modules";
import { inMessageSpan, startTelemetry, type Telemetry } from "../../functions/handlers/telemetry";
import type { Envelope } from "../../schemas";
import { taskEvent } from "../support/factories";
import {
  dynamoStreamEvent,
  dynamoStreamRecord,
  eventBridgeEnvelope,
  sqsEvent,
  sqsRecord,
} from "../support/lambda-events";
import { type OtlpReceiver, SPAN_KIND, STATUS_CODE, startOtlpReceiver } from "../support/otlp";

/**
 * The spans of the hops between a commit and a consumer (functions/handlers/hop-spans.ts),
 * exported to an OTLP/HTTP receiver in this process: the relay's `publish`, the dispatcher's
 * `send` and the consumer's `process` spans of one message share its trace and chain parent to
 * child, each hop passing its own span on in the message's `traceparent`; the front door's server
 * span continues the caller's header and parents the message it accepts. The handlers run on fake
 * AWS clients that keep what they are sent.
 */

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const COMMIT_SPAN = "00f067aa0ba902b7";
const BUS = "agentbus-events";
const GROUP = "task-projection";
const FIFO_QUEUE = `agentbus-${GROUP}.fifo`;

let receiver: OtlpReceiver;
let telemetry: Telemetry;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  telemetry = startTelemetry("hop-spans-test", () => undefined, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
  });
  await telemetry.ready;
});

afterAll(async () => {
  trace.disable();
  context.disable();
  propagation.disable();
  await receiver.close();
});

/** An AWS client that keeps every command and answers each operation as `answers` says. */
function fakeAws(answers: Record<string, (input: Record<string, unknown>) => unknown>) {
  const sent: AwsCommand[] = [];
  const client: AwsClient = {
    send: async (command: AwsCommand) => {
      sent.push(command);
      const answer = answers[command.operation];
      if (!answer) throw new Error(`unexpected ${command.operation}`);
      return { ...(answer(command.input as Record<string, unknown>) as object), $metadata: {} };
    },
  } as AwsClient;
  return { client, sent };
}

/** The input of the first command a fake client was sent. */
function firstInput<T>(sent: readonly AwsCommand[]): T {
  const [first] = sent;
  if (!first) throw new Error("nothing was sent");
  return first.input as T;
}

const putEvents = (input: Record<string, unknown>) => ({
  FailedEntryCount: 0,
  Entries: (input.Entries as unknown[]).map((_, i) => ({ EventId: `ev-${i}` })),
});
const sendBatch = (input: Record<string, unknown>) => ({
  Successful: (input.Entries as { Id: string }[]).map((e) => ({ Id: e.Id, MessageId: e.Id })),
  Failed: [],
});

const spanNamed = (name: string) => receiver.received().filter((s) => s.name === name);

describe("one message's hops, relay to consumer", () => {
  it("share the message's trace, each span the child of the one before", async () => {
    const stored = { ...taskEvent(1), traceparent: `00-${TRACE_ID}-${COMMIT_SPAN}-01` };
    const bus = fakeAws({ PutEvents: putEvents });
    const relay = createRelayHandler({ env: { BUS_EVENTS: BUS }, eventbridge: bus.client });
    await relay(dynamoStreamEvent([dynamoStreamRecord({ ...eventItem(stored) })]));
    const entry = firstInput<{ Entries: { Detail: string }[] }>(bus.sent).Entries[0];
    const published = JSON.parse(entry?.Detail ?? "{}") as Envelope;

    const fifo = fakeAws({ SendMessageBatch: sendBatch });
    const dispatch = createDispatchHandler({
      env: {
        GROUP_NAME: GROUP,
        TARGET_QUEUE_URL: `http://127.0.0.1:9/000000000000/${FIFO_QUEUE}`,
        DEAD_LETTER_QUEUE_URL: "http://127.0.0.1:9/000000000000/agentbus-buffer-dlq",
      },
      sqs: fifo.client,
    });
    const buffered = JSON.stringify(eventBridgeEnvelope(published));
    const answer = await dispatch(sqsEvent([sqsRecord({ body: buffered })]));
    expect(answer.batchItemFailures).toEqual([]);
    const batch = firstInput<{ Entries: { MessageBody: string }[] }>(fifo.sent);
    const body = batch.Entries[0]?.MessageBody ?? "";

    // The consumer's own steps: the delivery decoded, its span made from its traceparent.
    const delivery = decodeDelivery(sqsRecord({ body }));
    const ids = messageIdsOf(delivery.envelope, 1);
    const traceparent = (delivery.envelope as Envelope).traceparent;
    await inMessageSpan(
      { ids, ...(traceparent ? { traceparent } : {}) },
      {
        group: GROUP,
        messageId: "fifo-1",
      },
      async () => undefined,
    );
    await telemetry.flush();

    const [publish] = spanNamed(`publish ${stored.event_type}`);
    const [send] = spanNamed(`send ${stored.event_type}`);
    const [process] = spanNamed(`process ${stored.event_type}`);
    if (!publish || !send || !process) throw new Error("a hop's span was not exported");
    expect(publish).toMatchObject({ traceId: TRACE_ID, parentSpanId: COMMIT_SPAN });
    expect(send).toMatchObject({ traceId: TRACE_ID, parentSpanId: publish.spanId });
    expect(process).toMatchObject({ traceId: TRACE_ID, parentSpanId: send.spanId });
    expect([publish.kind, send.kind, process.kind]).toEqual([
      SPAN_KIND.producer,
      SPAN_KIND.producer,
      SPAN_KIND.consumer,
    ]);
    // What each hop passed on names its own span; the stored event keeps the commit's.
    expect(parseTraceparent(published.traceparent)?.spanId).toBe(publish.spanId);
    expect(parseTraceparent(traceparent)?.spanId).toBe(send.spanId);
    expect(stored.traceparent).toBe(`00-${TRACE_ID}-${COMMIT_SPAN}-01`);

    expect(publish.attrs).toMatchObject({
      "messaging.system": "aws.eventbridge",
      "messaging.operation.type": "publish",
      "messaging.destination.name": BUS,
      "messaging.message.id": stored.event_id,
      "messaging.message.conversation_id": stored.correlation_id,
      "agentbus.event_id": stored.event_id,
      "agentbus.aggregate_version": 1,
    });
    expect(send.attrs).toMatchObject({
      "messaging.system": "aws_sqs",
      "messaging.operation.type": "send",
      "messaging.destination.name": FIFO_QUEUE,
      "messaging.consumer.group.name": GROUP,
      "messaging.message.id": stored.event_id,
    });
    expect(publish.status?.code ?? STATUS_CODE.unset).not.toBe(STATUS_CODE.error);
  });

  it("a publish the bus refuses ends its span with status error and the entry's code", async () => {
    const event = taskEvent(1);
    const publisher = tracedPublisher(
      {
        publish: async (_topic, envelopes) =>
          envelopes.map((e) => ({ eventId: e.event_id, code: "ThrottlingException", message: "" })),
      },
      () => BUS,
    );
    const failures = await publisher.publish("events", [event]);
    expect(failures).toHaveLength(1);
    await telemetry.flush();
    const span = spanNamed(`publish ${event.event_type}`).find(
      (s) => s.attrs["agentbus.event_id"] === event.event_id,
    );
    expect(span?.status?.code).toBe(STATUS_CODE.error);
    expect(span?.attrs["error.type"]).toBe("ThrottlingException");
  });

  it("a span not recorded leaves the message as it came", () => {
    const event = taskEvent(1);
    const noOp = trace.wrapSpanContext({
      traceId: TRACE_ID,
      spanId: COMMIT_SPAN,
      traceFlags: 1,
    });
    expect(continuedBy(event, noOp)).toBe(event);
    const recorded = trace.getTracer("test").startSpan("recorded");
    const broken = { ...event, traceparent: "not-a-traceparent" };
    expect(continuedBy(broken, recorded)).toBe(broken);
    expect(parseTraceparent(continuedBy(event, recorded).traceparent)?.spanId).toBe(
      recorded.spanContext().spanId,
    );
    recorded.end();
  });
});

describe("the lease sweeper's spans", () => {
  it("a sweep's span parents the publish span of each message it sends, which the message names", async () => {
    const now = new Date("2090-06-01T12:00:00.000Z");
    const past = new Date(now.getTime() - 5 * 60_000).toISOString();
    const run: StoredState = {
      aggregate: { type: "agent_run", id: "ar_hop1" },
      revision: 1,
      version: 1,
      dueAt: past,
      data: {
        run_id: "ar_hop1",
        task_id: "task_hop1",
        status: "BLOCKED",
        decision_type: "refund_review.decision.requested",
        correlation_id: "corr_hop1",
        waiting: { tool_call_id: "call_1", deadline: past },
      },
    };
    const published: Envelope[] = [];
    const sweep = createSweeperHandler({
      env: { STATE_TABLE: "state", BUS_EVENTS: BUS, BUS_COMMANDS: "agentbus-commands" },
      index: { due: async () => [run.aggregate], loadStates: async () => [run] },
      publisher: {
        publish: async (_topic, envelopes) => {
          published.push(...envelopes);
          return [];
        },
      },
      clock: new ManualClock(now.toISOString()),
    });
    expect(await sweep()).toMatchObject({ approvalExpired: 1, published: 1 });
    await telemetry.flush();

    const [sweepSpan] = spanNamed("sweep");
    const [publish] = spanNamed("publish refund_review.decision.requested");
    if (!sweepSpan || !publish) throw new Error("the sweeper's spans were not exported");
    expect(publish).toMatchObject({ traceId: sweepSpan.traceId, parentSpanId: sweepSpan.spanId });
    expect(publish.attrs["messaging.destination.name"]).toBe("agentbus-commands");
    expect(parseTraceparent(published[0]?.traceparent)).toMatchObject({
      traceId: sweepSpan.traceId,
      spanId: publish.spanId,
    });
  });
});

/** A client's POST of a conversation message through the HTTP API (payload format 2.0). */
function postMessage(traceparent: string): APIGatewayProxyEventV2WithJWTAuthorizer {
  const route = "/v1/conversations/{conversation_id}/messages";
  return {
    version: "2.0",
    routeKey: `POST ${route}`,
    rawPath: "/v1/conversations/conv_hop1/messages",
    rawQueryString: "",
    headers: { "content-type": "application/json", traceparent },
    body: JSON.stringify({ text: "Where is order 123?" }),
    isBase64Encoded: false,
    requestContext: {
      http: { method: "POST", path: "/v1/conversations/conv_hop1/messages" },
      requestId: "req-hop-1",
      routeKey: `POST ${route}`,
      authorizer: { jwt: { claims: { tenant_id: "acme", sub: "hop-user-1" }, scopes: [] } },
    },
  } as unknown as APIGatewayProxyEventV2WithJWTAuthorizer;
}

describe("the front door's server span", () => {
  it("continues the caller's traceparent and parents the message it accepts", async () => {
    const published: Envelope[] = [];
    const door = createFrontDoorHandler({
      env: { STATE_TABLE: "state", EVENTS_TABLE: "events", BUS_EVENTS: BUS },
      dynamodb: fakeAws({ GetItem: () => ({}), BatchGetItem: () => ({ Responses: {} }) }).client,
      publisher: {
        publish: async (_topic, envelopes) => {
          published.push(...envelopes);
          return [];
        },
      },
      accepted: new InMemoryAcceptedRequests(),
      limits: new InMemoryTenantLimits(),
      runs: new InMemoryRunsInFlight(),
      controls: new InMemoryModelControls(),
      sequences: new InMemoryClientSequences(),
    });
    const caller = "b7ad6b7169203331";
    const response = await door(postMessage(`00-${TRACE_ID}-${caller}-01`));
    expect(response.statusCode).toBe(202);
    await telemetry.flush();

    const [server] = spanNamed("POST /v1/conversations/{conversation_id}/messages");
    if (!server) throw new Error("the server span was not exported");
    expect(server).toMatchObject({
      kind: SPAN_KIND.server,
      traceId: TRACE_ID,
      parentSpanId: caller,
    });
    expect(server.attrs).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/v1/conversations/{conversation_id}/messages",
      "url.path": "/v1/conversations/conv_hop1/messages",
      "http.response.status_code": 202,
    });
    expect(published).toHaveLength(1);
    expect(parseTraceparent(published[0]?.traceparent)).toMatchObject({
      traceId: TRACE_ID,
      spanId: server.spanId,
    });
  });
});

describe("the names, as the semantic conventions spell them", () => {
  it("match @opentelemetry/semantic-conventions' messaging and HTTP attributes", () => {
    expect(HOP_ATTRIBUTES).toEqual({
      system: semconv.ATTR_MESSAGING_SYSTEM,
      operationType: semconv.ATTR_MESSAGING_OPERATION_TYPE,
      operationName: semconv.ATTR_MESSAGING_OPERATION_NAME,
      destination: semconv.ATTR_MESSAGING_DESTINATION_NAME,
      consumerGroup: semconv.ATTR_MESSAGING_CONSUMER_GROUP_NAME,
      messageId: semconv.ATTR_MESSAGING_MESSAGE_ID,
      conversationId: semconv.ATTR_MESSAGING_MESSAGE_CONVERSATION_ID,
      method: semconv.ATTR_HTTP_REQUEST_METHOD,
      route: semconv.ATTR_HTTP_ROUTE,
      path: semconv.ATTR_URL_PATH,
      scheme: semconv.ATTR_URL_SCHEME,
      status: semconv.ATTR_HTTP_RESPONSE_STATUS_CODE,
    });
    expect(MESSAGING_SYSTEMS.sqs).toBe(semconv.MESSAGING_SYSTEM_VALUE_AWS_SQS);
    expect([
      semconv.MESSAGING_OPERATION_TYPE_VALUE_PUBLISH,
      semconv.MESSAGING_OPERATION_TYPE_VALUE_SEND,
    ]).toEqual(["publish", "send"]);
  });
});
