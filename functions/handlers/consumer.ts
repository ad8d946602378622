import {
  BatchProcessor,
  EventType,
  processPartialResponse,
  SqsFifoPartialProcessorAsync,
} from "@aws-lambda-powertools/batch";
import { MetricUnit } from "@aws-lambda-powertools/metrics";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import { registry as defaultRegistry, type Envelope, type EventRegistry } from "../../schemas";
import { DynamoEventStore } from "../adapters/dynamodb/event-store";
import { EventBridgePublisher } from "../adapters/eventbridge/publisher";
import { SqsDeadLetterSink } from "../adapters/sqs/dead-letter-sink";
import { extendVisibility, releaseMessages } from "../adapters/sqs/visibility";
import type { HeartbeatSpec } from "../core/emit";
import { describe, PermanentError } from "../core/errors";
import { type ConsumeResult, consume, type Role } from "../core/pipeline";
import type { Clock, ConsumerDeps } from "../core/ports";
import { systemClock, ulidSource } from "../core/runtime";
import { ConsumerEnv, parseEnv } from "./env";
import { type Observability, observability } from "./observe";

export interface ConsumerOptions {
  readonly env?: Record<string, string | undefined>;
  readonly dynamodb?: DynamoDBClient;
  readonly sqs?: SQSClient;
  /** Publishes the role's heartbeats (with `HEARTBEAT_SECONDS` and `EVENTS_BUS_NAME`). */
  readonly eventbridge?: EventBridgeClient;
  readonly clock?: Clock;
  readonly registry?: EventRegistry;
  readonly observability?: Observability;
  /** Called with every settled record (for local tracing). */
  readonly onResult?: (
    result: ConsumeResult | { error: ReturnType<typeof describe>; body: string },
  ) => void;
}

export type SqsBatchHandler = (event: SQSEvent, context?: Context) => Promise<SQSBatchResponse>;

/**
 * The Lambda side of a consumer group: every record of an SQS FIFO batch goes through the shared
 * pipeline with the role's decision function. Within a message group the first failure stops
 * the group (it and the rest of that group are reported back, in order); other groups go on.
 * Permanent failures are sent to the dead-letter queue at once, with their reason, and
 * acknowledged; transient ones are retried after a backoff set through the message's visibility.
 *
 * Heartbeat (`HEARTBEAT_SECONDS` > 0): while a record is inside the pipeline, every that many
 * seconds its message visibility is set to `VISIBILITY_TIMEOUT_SECONDS` again, and the role's
 * `heartbeat(event)` message, if it has one, is published to `EVENTS_BUS_NAME`. A heartbeat that
 * fails is logged and never fails the record; the timer stops when the record is settled.
 */
export function createConsumerHandler<S>(
  role: Role<S>,
  options: ConsumerOptions = {},
): SqsBatchHandler {
  const env = parseEnv(ConsumerEnv, options.env ?? process.env, `consumer ${role.group}`);
  if (env.GROUP_NAME !== role.group) {
    throw new Error(`GROUP_NAME is ${env.GROUP_NAME} but the handler's role is ${role.group}`);
  }
  const clock = options.clock ?? systemClock;
  const { logger, metrics, tracer } =
    options.observability ?? observability(role.group, role.group);
  const dynamodb = tracer.captureAWSv3Client(options.dynamodb ?? new DynamoDBClient({}));
  const sqs = tracer.captureAWSv3Client(options.sqs ?? new SQSClient({}));
  const registry = options.registry ?? defaultRegistry;
  const store = new DynamoEventStore({
    client: dynamodb,
    tables: { state: env.STATE_TABLE, events: env.EVENTS_TABLE, inbox: env.INBOX_TABLE },
    clock,
  });
  const deadLetters = new SqsDeadLetterSink({ client: sqs, queueUrl: env.DEAD_LETTER_QUEUE_URL });
  const deps = { store, registry, clock, ids: ulidSource(clock) };
  const inboxTtlSeconds = Math.round(env.INBOX_TTL_DAYS * 24 * 3600);
  const heartbeatPublisher =
    env.HEARTBEAT_SECONDS > 0 && role.heartbeat && env.EVENTS_BUS_NAME
      ? new EventBridgePublisher({
          client: tracer.captureAWSv3Client(options.eventbridge ?? new EventBridgeClient({})),
          buses: { events: env.EVENTS_BUS_NAME },
        })
      : undefined;
  if (env.HEARTBEAT_SECONDS > 0 && role.heartbeat && !env.EVENTS_BUS_NAME)
    logger.warn(
      "HEARTBEAT_SECONDS is set but EVENTS_BUS_NAME is not: heartbeats extend the message visibility only",
    );

  /** Extend the record's visibility and publish the role's heartbeat; never throws. */
  const beat = async (record: SQSRecord, raw: unknown): Promise<void> => {
    await extendVisibility(
      sqs,
      env.QUEUE_URL,
      record.receiptHandle,
      env.VISIBILITY_TIMEOUT_SECONDS,
    ).catch((e: unknown) =>
      logger.warn("heartbeat: could not extend the message visibility", { error: describe(e) }),
    );
    if (!heartbeatPublisher || !role.heartbeat) return;
    try {
      const parsed = registry.parse(raw);
      if (!parsed.ok) return;
      const spec = role.heartbeat(parsed.envelope);
      if (!spec) return;
      const envelope = heartbeatEnvelope(spec, parsed.envelope, role.group, deps);
      const topic = registry.definitions().find((d) => d.type === envelope.event_type)?.topic;
      if (topic !== "events")
        throw new PermanentError(
          "heartbeat.topic",
          `${envelope.event_type} is not on the events topic`,
        );
      const failures = await heartbeatPublisher.publish("events", [envelope]);
      if (failures.length > 0)
        logger.warn("heartbeat: not published", { failures: failures.map((f) => f.code) });
      else metrics.addMetric("Heartbeat", MetricUnit.Count, 1);
    } catch (e) {
      logger.warn("heartbeat: could not publish", { error: describe(e) });
    }
  };

  /** Run `work` with the heartbeat on (if configured); the timer is always cleared. */
  const withHeartbeat = async <T>(
    record: SQSRecord,
    raw: unknown,
    work: () => Promise<T>,
  ): Promise<T> => {
    if (!(env.HEARTBEAT_SECONDS > 0)) return work();
    let beating: Promise<void> | undefined;
    const timer = setInterval(() => {
      if (beating) return;
      beating = beat(record, raw).finally(() => {
        beating = undefined;
      });
    }, env.HEARTBEAT_SECONDS * 1000);
    try {
      return await work();
    } finally {
      clearInterval(timer);
      await beating;
    }
  };

  /** `reached` collects the records of this batch that got to the pipeline (the rest were skipped). */
  const recordHandler =
    (reached: Set<string>) =>
    async (record: SQSRecord): Promise<void> => {
      reached.add(record.messageId);
      const receiveCount = Number(record.attributes.ApproximateReceiveCount ?? "1");
      try {
        let raw: unknown;
        try {
          raw = unwrapEventBridge(JSON.parse(record.body));
        } catch {
          throw new PermanentError("envelope.not_json", "message body is not JSON");
        }
        if (raw && typeof raw === "object") {
          const e = raw as Record<string, unknown>;
          logger.appendKeys({
            event_id: e.event_id as string,
            event_type: e.event_type as string,
            correlation_id: e.correlation_id as string,
            causation_id: e.causation_id as string,
            task_id: e.task_id as string,
          });
        }
        const result = await withHeartbeat(record, raw, () =>
          consume(raw, role, deps, { receiveCount, inboxTtlSeconds }),
        );
        for (const step of result.steps) {
          metrics.addMetric(metricName(step.status), MetricUnit.Count, 1);
          if (step.repaired) metrics.addMetric("GapRepaired", MetricUnit.Count, 1);
          if (step.status === "discarded") {
            const single = metrics.singleMetric();
            single.addDimension("reason", step.reason ?? "unknown");
            single.addMetric("DiscardedByReason", MetricUnit.Count, 1);
          }
          logger.info(`${step.status} ${step.eventType} v${step.version}`, {
            step_event_id: step.eventId,
            status: step.status,
            reason: step.reason,
            repaired: step.repaired,
            emitted: step.emitted.map((e) => e.event_id),
          });
        }
        options.onResult?.(result);
      } catch (error) {
        const info = describe(error);
        options.onResult?.({ error: info, body: record.body });
        if (info.errorClass === "permanent") {
          logger.error("dead-lettering a message that can never succeed", {
            error: info,
            receive_count: receiveCount,
          });
          metrics.addMetric("DeadLettered", MetricUnit.Count, 1);
          await deadLetters.send({
            body: record.body,
            code: info.code,
            reason: info.message,
            groupId: record.attributes.MessageGroupId,
            deduplicationId: record.attributes.MessageDeduplicationId ?? record.messageId,
          });
          return;
        }
        const delay = Math.min(
          env.RETRY_MAX_SECONDS,
          env.RETRY_BASE_SECONDS * 2 ** Math.max(0, receiveCount - 1),
        );
        logger.warn("will retry", {
          error: info,
          receive_count: receiveCount,
          retry_in_seconds: delay,
        });
        metrics.addMetric("Retried", MetricUnit.Count, 1);
        await extendVisibility(sqs, env.QUEUE_URL, record.receiptHandle, delay).catch(
          (e: unknown) => logger.warn("could not set the retry backoff", { error: describe(e) }),
        );
        throw error;
      } finally {
        logger.resetKeys();
      }
    };

  return async (event, context) => {
    try {
      // FIFO: in order, and the first failure of a message group holds back the rest of that group.
      // Standard queue (a group that needs no order): records are independent.
      const fifo = event.Records.some((r) => r.attributes.MessageGroupId !== undefined);
      const reached = new Set<string>();
      const handleRecord = recordHandler(reached);
      if (!fifo) {
        return await processPartialResponse(
          event,
          handleRecord,
          new BatchProcessor(EventType.SQS),
          {
            context,
            throwOnFullBatchFailure: false,
          },
        );
      }
      const response = await processPartialResponse(
        event,
        handleRecord,
        new SqsFifoPartialProcessorAsync(),
        {
          context,
          skipGroupOnError: true,
          throwOnFullBatchFailure: false,
        },
      );
      // Records skipped behind a failed one never set a backoff: release them now, so their group
      // resumes (in order) when the failed record's backoff ends, not after the visibility timeout.
      const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
      const skipped = event.Records.filter(
        (r) => failed.has(r.messageId) && !reached.has(r.messageId),
      );
      if (skipped.length > 0) {
        await releaseMessages(
          sqs,
          env.QUEUE_URL,
          skipped.map((r) => r.receiptHandle),
        ).catch((e: unknown) =>
          logger.warn("could not release the records skipped behind a failure", {
            error: describe(e),
          }),
        );
      }
      return response;
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}

/**
 * A group without ordering has its rule deliver straight to its queue, so the body is the
 * EventBridge event; through the dispatch hop (or a pipe) it is the bare envelope. An envelope
 * never has `detail-type`, so the two cannot be mistaken for each other.
 */
function unwrapEventBridge(body: unknown): unknown {
  if (body && typeof body === "object" && "detail-type" in body && "detail" in body) {
    return (body as { detail: unknown }).detail;
  }
  return body;
}

function metricName(status: ConsumeResult["status"]): string {
  return {
    applied: "Applied",
    duplicate: "Duplicate",
    discarded: "Discarded",
    rejected: "Rejected",
  }[status];
}

/** The unsequenced envelope of a heartbeat spec, caused by the event being worked on. */
function heartbeatEnvelope(
  spec: HeartbeatSpec,
  cause: Envelope,
  producer: string,
  deps: Pick<ConsumerDeps, "registry" | "ids" | "clock">,
): Envelope {
  const definitions = deps.registry
    .definitions()
    .filter((d) => d.type === spec.type)
    .sort((a, b) => b.schemaVersion - a.schemaVersion);
  const definition =
    spec.schemaVersion === undefined
      ? definitions[0]
      : definitions.find((d) => d.schemaVersion === spec.schemaVersion);
  if (!definition || definition.sequenced)
    throw new PermanentError(
      "heartbeat.invalid_type",
      `a heartbeat must be a registered unsequenced type, not ${spec.type}`,
    );
  const candidate = {
    event_id: deps.ids.next(),
    event_type: definition.type,
    schema_version: definition.schemaVersion,
    occurred_at: deps.clock.now().toISOString(),
    correlation_id: cause.correlation_id,
    causation_id: cause.event_id,
    task_id: spec.taskId ?? cause.task_id,
    conversation_id: spec.conversationId ?? cause.conversation_id,
    aggregate: { ...spec.aggregate, version: 0 },
    order_key: spec.orderKey ?? spec.aggregate.id,
    producer,
    attempt: 1,
    expires_at: spec.expiresAt,
    payload: spec.payload,
  };
  const parsed = deps.registry.parse(JSON.parse(JSON.stringify(candidate)));
  if (!parsed.ok)
    throw new PermanentError("heartbeat.invalid", `invalid ${spec.type}: ${parsed.message}`);
  return parsed.envelope;
}

/** A Lambda entry point: built on the first invocation from the function's environment, then reused. */
export function lambdaConsumer<S>(role: Role<S>): SqsBatchHandler {
  let handler: SqsBatchHandler | undefined;
  return (event, context) => {
    handler ??= createConsumerHandler(role);
    return handler(event, context);
  };
}
