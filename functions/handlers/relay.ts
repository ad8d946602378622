import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { Context, DynamoDBStreamEvent } from "aws-lambda";
import {
  registry as defaultRegistry,
  type Envelope,
  type EventRegistry,
  TOPICS,
  type Topic,
} from "../../schemas";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { SendMessage } from "../adapters/aws/operations";
import { relayFailureRecords } from "../adapters/dynamodb/relay-failure";
import { envelopesFromStreamRecords } from "../adapters/dynamodb/stream";
import { EventBridgePublisher, RELAY_EVENT_SOURCE } from "../adapters/eventbridge/publisher";
import {
  AwsSubscriberBusClient,
  BothBusesPublisher,
  type SubscriberBusClient,
  SubscriberBusPublisher,
} from "../adapters/eventbridge/subscriber-bus";
import { SqsFifoSender } from "../adapters/sqs/fifo-sender";
import { DIRECT_GROUPS_ENV, type DirectDeliveryOptions } from "../core/direct-delivery";
import { AgentBusError, describe } from "../core/errors";
import { packedJsonText } from "../core/packed-json";
import { parseEnv } from "../core/parse-env";
import type { EventPublisher } from "../core/ports";
import {
  EVENT_TOPICS_ENV,
  type RelayReport,
  relay,
  typeTopicsOf,
  UNPUBLISHED_TYPES_ENV,
} from "../core/relay";
import { containerAwsClient, containerEventBridgeV2Client } from "./aws";
import { DirectGroupJson } from "./env";
import { MESSAGING_SYSTEMS, tracedFifoSender, tracedPublisher } from "./hop-spans";
import { lambdaEntry } from "./lambda-entry";
import { type Observability, observability } from "./observe";

/**
 * The relay reads one `BUS_<TOPIC>` variable per topic present in the stack, and a
 * `BUS_V2_<TOPIC>` (the ARN of the topic's new bus) per topic a `delivery: "subscriber"` group reads.
 */
export const RelayEnv = z
  .object({
    BUS_COMMANDS: z.optional(z.string().check(z.minLength(1))),
    BUS_EVENTS: z.optional(z.string().check(z.minLength(1))),
    BUS_AUDIT: z.optional(z.string().check(z.minLength(1))),
    BUS_V2_COMMANDS: z.optional(z.string().check(z.minLength(1))),
    BUS_V2_EVENTS: z.optional(z.string().check(z.minLength(1))),
    BUS_V2_AUDIT: z.optional(z.string().check(z.minLength(1))),
    /** Where the relay records the keys of the events it could not publish (./relay-failure). */
    RELAY_FAILURE_QUEUE_URL: z.optional(z.string().check(z.minLength(1))),
    /** The topics of the stack's application event types (JSON, topic -> types), from the stack. */
    [EVENT_TOPICS_ENV]: z.optional(
      z.jsonText(
        z.partialRecord(z.enum(TOPICS), z.array(z.string())),
        "a JSON object of topic -> event types",
      ),
    ),
    /** The event types the relay leaves unpublished (JSON array), from the stack. */
    [UNPUBLISHED_TYPES_ENV]: z.optional(
      packedJsonText(z.array(z.string()), "a JSON array of event types"),
    ),
    /**
     * The groups the relay delivers to their FIFO queues itself (`delivery: "relay"`): JSON
     * (compressed when long, ../core/packed-json.ts), an array of { group, queue, tenantConcurrency?,
     * rules: topic -> pattern }, from the stack.
     */
    [DIRECT_GROUPS_ENV]: z.optional(
      // Each FIFO queue's URL is RELAY_FAILURE_QUEUE_URL's with its name.
      packedJsonText(
        z.array(DirectGroupJson),
        "a JSON array of { group, queue, tenantConcurrency?, rules }",
      ),
    ),
  })
  .check(
    z.refine((e) => e.BUS_COMMANDS || e.BUS_EVENTS || e.BUS_AUDIT, {
      message: "at least one BUS_<TOPIC> must be set",
    }),
  );
export type RelayEnv = z.output<typeof RelayEnv>;

export interface RelayHandlerOptions {
  readonly env?: Record<string, string | undefined>;
  readonly eventbridge?: AwsClient;
  /** The client the new buses' PutEvents is sent with (`eventbridgev2`), when no `subscriberBus`. */
  readonly eventbridgev2?: AwsClient;
  /**
   * The new buses' PutEvents, used when a `BUS_V2_<TOPIC>` is set: the local runtime gives its
   * emulation; by default AwsSubscriberBusClient on `eventbridgev2`.
   */
  readonly subscriberBus?: SubscriberBusClient;
  /** The client the relay's failure records are sent with (RELAY_FAILURE_QUEUE_URL). */
  readonly sqs?: AwsClient;
  readonly registry?: EventRegistry;
  readonly observability?: Observability;
  readonly onReport?: (report: RelayReport) => void;
}

export type RelayHandler = (event: DynamoDBStreamEvent, context?: Context) => Promise<void>;

/**
 * The transactional outbox's publisher: events-table stream -> PutEvents on the topic's bus.
 * A failure after bounded in-call retries first records the keys of the events not published in
 * the failure queue (a relay failure record, which `agentbus republish` reads however old it is),
 * then fails the invocation, so the event source mapping retries (bisecting the batch) and finally
 * parks the batch's stream positions in its on-failure destination, the same queue. Events it
 * cannot place on a topic (relay.unknown_type) are the exception: once their failure record is
 * sent, the invocation succeeds (the rest of the batch was published, and a retry cannot place
 * them); the failure queue's alarm fires, and `agentbus republish --failures` publishes them.
 */
export function createRelayHandler(options: RelayHandlerOptions = {}): RelayHandler {
  const env = parseEnv(RelayEnv, options.env ?? process.env, "relay");
  const { logger, metrics, tracer, telemetry } = options.observability ?? observability("relay");
  const buses: Partial<Record<Topic, string>> = {
    commands: env.BUS_COMMANDS,
    events: env.BUS_EVENTS,
    audit: env.BUS_AUDIT,
  };
  // Its own source: the rule forwarding a topic's classic events to its new bus leaves them out.
  const classic = new EventBridgePublisher({
    client: tracer.capture(options.eventbridge ?? containerAwsClient()),
    buses,
    source: RELAY_EVENT_SOURCE,
  });
  // Each event in its `publish` span, which the traceparent it goes out with names (./hop-spans).
  const publisher = tracedPublisher(
    withSubscriberBuses(classic, env, () => subscriberBusClient(options, tracer)),
    (topic) => buses[topic],
  );
  const registry = options.registry ?? defaultRegistry;
  const typeTopics = typeTopicsOf(env[EVENT_TOPICS_ENV]);
  const unpublished = new Set(env[UNPUBLISHED_TYPES_ENV] ?? []);
  const sqs = tracer.capture(options.sqs ?? containerAwsClient());
  const direct = directDelivery(env, sqs);
  const recordFailure = failureRecorder(env.RELAY_FAILURE_QUEUE_URL, sqs, logger);

  return async (event) => {
    await telemetry.ready;
    const { envelopes, skipped, topics } = envelopesFromStreamRecords(event.Records);
    if (skipped.length)
      logger.warn("stream records without an envelope were skipped", { count: skipped.length });
    try {
      // Personal fields go on the buses sealed, as the event store keeps them: whoever reads
      // them opens them with the customer's key (functions/core/personal-data/delivery.ts).
      const report = await relay(envelopes, registry, publisher, {
        topics,
        typeTopics,
        unpublished,
        ...(direct ? { direct } : {}),
      });
      addReportMetrics(metrics, report);
      options.onReport?.(report);
    } catch (error) {
      const recorded = await recordFailure(envelopes, error);
      if (!(recorded && isUnplaced(error))) throw error;
      logger.error("events of unknown types were recorded in the failure queue", {
        error: describe(error),
      });
      metrics.addMetric("RelayUnplaced", MetricUnit.Count, unpublishedCount(error));
    } finally {
      metrics.publishStoredMetrics();
      await telemetry.flush();
    }
  };
}

/**
 * The groups the relay delivers itself (`DIRECT_GROUPS`), each sent to through a SendMessageBatch
 * sender of its FIFO queue, every message in its `send` span; none when the stack names none.
 */
function directDelivery(env: RelayEnv, sqs: AwsClient): DirectDeliveryOptions | undefined {
  const groups = env[DIRECT_GROUPS_ENV] ?? [];
  if (groups.length === 0) return undefined;
  const failureQueue = env.RELAY_FAILURE_QUEUE_URL;
  if (!failureQueue)
    throw new Error(
      `relay: ${DIRECT_GROUPS_ENV} names queues, whose URLs are RELAY_FAILURE_QUEUE_URL's with their names, and RELAY_FAILURE_QUEUE_URL is not set`,
    );
  const base = failureQueue.slice(0, failureQueue.lastIndexOf("/") + 1);
  const senders = new Map(
    groups.map((g) => [
      g.group,
      tracedFifoSender(new SqsFifoSender({ client: sqs, queueUrl: `${base}${g.queue}` }), {
        operation: "send",
        system: MESSAGING_SYSTEMS.sqs,
        destination: g.queue,
        group: g.group,
      }),
    ]),
  );
  return {
    groups,
    senderOf: (group) => {
      const sender = senders.get(group.group);
      if (!sender) throw new Error(`no sender for group ${group.group}`);
      return sender;
    },
  };
}

/** What a relay run did, as metrics. */
function addReportMetrics(metrics: Observability["metrics"], report: RelayReport): void {
  metrics.addMetric("Relayed", MetricUnit.Count, report.published);
  metrics.addMetric("PutEventsCalls", MetricUnit.Count, report.calls);
  if (report.retriedEntries)
    metrics.addMetric("RelayRetriedEntries", MetricUnit.Count, report.retriedEntries);
  if (report.direct) {
    metrics.addMetric("RelayDelivered", MetricUnit.Count, report.direct.delivered);
    metrics.addMetric("SendMessageBatchCalls", MetricUnit.Count, report.direct.calls);
  }
}

/** The new buses' PutEvents: the one given, else AwsSubscriberBusClient on `eventbridgev2`. */
function subscriberBusClient(
  options: RelayHandlerOptions,
  tracer: Observability["tracer"],
): SubscriberBusClient {
  return (
    options.subscriberBus ??
    new AwsSubscriberBusClient(
      tracer.capture(options.eventbridgev2 ?? containerEventBridgeV2Client()),
    )
  );
}

/**
 * `classic`, and the topics' new buses when the environment names any: each event is published to
 * both, to the new bus with its order key as the event group (SubscriberBusPublisher).
 */
function withSubscriberBuses(
  classic: EventPublisher,
  env: RelayEnv,
  client: () => SubscriberBusClient,
): EventPublisher {
  const buses: Partial<Record<Topic, string>> = {
    ...(env.BUS_V2_COMMANDS ? { commands: env.BUS_V2_COMMANDS } : {}),
    ...(env.BUS_V2_EVENTS ? { events: env.BUS_V2_EVENTS } : {}),
    ...(env.BUS_V2_AUDIT ? { audit: env.BUS_V2_AUDIT } : {}),
  };
  const topics = new Set(Object.keys(buses) as Topic[]);
  if (topics.size === 0) return classic;
  return new BothBusesPublisher(classic, new SubscriberBusPublisher(client(), buses), topics);
}

/**
 * What records the events of a failed batch that were not published (all of them unless the
 * error names those: relay.publish_failed's and relay.unknown_type's `unpublished`) in the failure
 * queue; nothing without a queue. Whether the record was sent: one that cannot be is logged, and
 * the stream's own record of the batch follows.
 */
function failureRecorder(
  queueUrl: string | undefined,
  sqs: AwsClient,
  logger: Observability["logger"],
) {
  return async (envelopes: readonly Envelope[], error: unknown): Promise<boolean> => {
    if (!queueUrl || envelopes.length === 0) return false;
    const named = error instanceof AgentBusError ? error.details.unpublished : undefined;
    const ids = Array.isArray(named) ? new Set(named) : undefined;
    const unpublished = ids ? envelopes.filter((e) => ids.has(e.event_id)) : envelopes;
    const { code, message } = describe(error);
    try {
      for (const record of relayFailureRecords(unpublished, { code, message }))
        await sqs.send(SendMessage({ QueueUrl: queueUrl, MessageBody: JSON.stringify(record) }));
      return true;
    } catch (sendError) {
      logger.error("the relay failure record could not be sent", { error: describe(sendError) });
      return false;
    }
  };
}

/** Events the relay could not place on a topic: once recorded, no retry would place them. */
function isUnplaced(error: unknown): error is AgentBusError {
  return error instanceof AgentBusError && error.code === "relay.unknown_type";
}

/** How many events an error names as not published. */
function unpublishedCount(error: AgentBusError): number {
  const named = error.details.unpublished;
  return Array.isArray(named) ? named.length : 0;
}

export const { create, handler } = lambdaEntry(createRelayHandler);
