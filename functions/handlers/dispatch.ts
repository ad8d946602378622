import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { Span } from "@opentelemetry/api";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { registry as defaultRegistry, type EventRegistry } from "../../schemas";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { DynamoFailureLog } from "../adapters/dynamodb/failure-log";
import { SqsDeadLetterSink } from "../adapters/sqs/dead-letter-sink";
import { SqsFifoSender } from "../adapters/sqs/fifo-sender";
import { extendVisibility } from "../adapters/sqs/visibility";
import { type DispatchItem, type DispatchReport, dispatch } from "../core/dispatch";
import { describe } from "../core/errors";
import { parseEnv } from "../core/parse-env";
import type { Clock, DeadLetterSink } from "../core/ports";
import { retentionDays } from "../core/retention";
import { systemClock } from "../core/runtime";
import { containerAwsClient } from "./aws";
import { recordingDeadLetters } from "./failure-record";
import { continuedBy, endHopSpan, type Hop, MESSAGING_SYSTEMS, startHopSpan } from "./hop-spans";
import { lambdaEntry } from "./lambda-entry";
import { type Observability, observability } from "./observe";
import { receiveCountOf, retryDelaySeconds } from "./retry";

/** The dispatcher's settings. */
export const DispatchEnv = z.object({
  GROUP_NAME: z.string().check(z.minLength(1)),
  TARGET_QUEUE_URL: z.url(),
  DEAD_LETTER_QUEUE_URL: z.url(),
  /** The buffer queue: records that could not be sent come back after a backoff set on it. */
  SOURCE_QUEUE_URL: z.optional(z.url()),
  RETRY_BASE_SECONDS: z._default(z.coerce.number().check(z.int(), z.minimum(0)), 2),
  RETRY_MAX_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(0), z.maximum(43_199)),
    300,
  ),
  /** Where a dead letter's failure record goes (for tracing); none recorded when absent. */
  INBOX_TABLE: z.optional(z.string().check(z.minLength(1))),
  INBOX_TTL_DAYS: z._default(z.coerce.number().check(z.positive()), retentionDays("inboxRows")),
  /** Most consumer invocations one tenant may hold (tenant lanes); unset: grouped by order key. */
  TENANT_CONCURRENCY: z.optional(z.coerce.number().check(z.int(), z.minimum(1))),
});
export type DispatchEnv = z.output<typeof DispatchEnv>;

/** The part of an EventBridge event the dispatcher needs (the envelope is the `detail`). */
const EventBridgeEvent = z.object({
  "detail-type": z.string(),
  source: z.string(),
  time: z.optional(z.string()),
  /** Set by EventBridge on the events of an archive replay. */
  "replay-name": z.optional(z.string().check(z.minLength(1))),
  detail: z.unknown(),
});

export interface DispatchOptions {
  readonly env?: Record<string, string | undefined>;
  readonly sqs?: AwsClient;
  readonly dynamodb?: AwsClient;
  readonly clock?: Clock;
  readonly registry?: EventRegistry;
  readonly observability?: Observability;
  readonly onReport?: (report: DispatchReport) => void;
}

export type DispatchHandler = (event: SQSEvent, context?: Context) => Promise<SQSBatchResponse>;

/**
 * Buffer queue -> the group's FIFO queue. A classic EventBridge rule can only set a static
 * MessageGroupId, so this hop sets it per entity from the envelope's order key, or per tenant lane
 * with `TENANT_CONCURRENCY` (`messageGroupOf`).
 */
export function createDispatchHandler(options: DispatchOptions = {}): DispatchHandler {
  const env = parseEnv(DispatchEnv, options.env ?? process.env, "dispatch");
  const { logger, metrics, tracer, telemetry } =
    options.observability ?? observability(`${env.GROUP_NAME}-dispatch`, env.GROUP_NAME);
  const sqs = tracer.capture(options.sqs ?? containerAwsClient());
  const sender = new SqsFifoSender({ client: sqs, queueUrl: env.TARGET_QUEUE_URL });
  const deadLetters = deadLetterSink(env, options, sqs, { logger, tracer });
  const registry = options.registry ?? defaultRegistry;
  const hop = sendHopOf(env);
  const backOff = backOffOf(env, sqs, logger);

  return async (event) => {
    await telemetry.ready;
    const { items, notDeadLettered } = await itemsOf(event, deadLetters, metrics);
    const sends = inSendSpans(items, hop);
    const dispatched = await dispatch(
      sends.items,
      registry,
      sender,
      deadLetters,
      env.TENANT_CONCURRENCY,
    );
    sends.end(dispatched.failedRecordIds);
    await telemetry.flush();
    const report = {
      ...dispatched,
      failedRecordIds: [...dispatched.failedRecordIds, ...notDeadLettered],
    };
    metrics.addMetric("Dispatched", MetricUnit.Count, report.sent);
    if (report.deadLettered)
      metrics.addMetric("DeadLettered", MetricUnit.Count, report.deadLettered);
    if (report.failedRecordIds.length) {
      logger.warn("some sends failed; they go back to the buffer queue", {
        failed: report.failedRecordIds,
      });
      await backOff(event, report.failedRecordIds);
    }
    metrics.publishStoredMetrics();
    options.onReport?.(report);
    return {
      batchItemFailures: report.failedRecordIds.map((itemIdentifier) => ({ itemIdentifier })),
    };
  };
}

export const { create, handler } = lambdaEntry(createDispatchHandler);

/**
 * Failed records become visible again after 2^n seconds (n = receives so far, capped) instead
 * of after the buffer's whole visibility timeout, so one failed send does not hold its entity's
 * events back for minutes.
 */
function backOffOf(env: DispatchEnv, sqs: AwsClient, logger: Observability["logger"]) {
  return async (event: SQSEvent, failedIds: readonly string[]): Promise<void> => {
    if (!env.SOURCE_QUEUE_URL) return;
    const failed = new Set(failedIds);
    for (const record of event.Records) {
      if (!failed.has(record.messageId)) continue;
      const delay = retryDelaySeconds(
        receiveCountOf(record),
        env.RETRY_BASE_SECONDS,
        env.RETRY_MAX_SECONDS,
      );
      await extendVisibility(sqs, env.SOURCE_QUEUE_URL, record.receiptHandle, delay).catch(
        (e: unknown) => logger.warn("could not set the retry backoff", { error: describe(e) }),
      );
    }
  };
}

/** The dispatcher's hop: a send to the group's FIFO queue (its name: `messaging.destination.name`). */
function sendHopOf(env: DispatchEnv): Hop {
  return {
    operation: "send",
    system: MESSAGING_SYSTEMS.sqs,
    destination: env.TARGET_QUEUE_URL.split("/").at(-1) ?? env.TARGET_QUEUE_URL,
    group: env.GROUP_NAME,
  };
}

/**
 * Each item in its `send` span (./hop-spans.ts), its envelope's `traceparent` continued by it;
 * `end` ends them, those of the records whose send failed with status error.
 */
function inSendSpans(items: readonly DispatchItem[], hop: Hop) {
  const spans = items.map((item) => startHopSpan(item.envelope, hop));
  return {
    items: items.map((item, i) => ({
      ...item,
      envelope: continuedBy(item.envelope, spans[i] as Span),
    })),
    end(failedRecordIds: readonly string[]) {
      const failed = new Set(failedRecordIds);
      items.forEach((item, i) => {
        const failure = failed.has(item.recordId) ? { code: "dispatch.send_failed" } : undefined;
        endHopSpan(spans[i] as Span, failure);
      });
    },
  };
}

/** The buffer's dead-letter queue, each dead letter also recorded for tracing when the inbox table is given. */
function deadLetterSink(
  env: DispatchEnv,
  options: DispatchOptions,
  sqs: AwsClient,
  { logger, tracer }: Pick<Observability, "logger" | "tracer">,
): DeadLetterSink {
  const dynamodb = env.INBOX_TABLE
    ? tracer.capture(options.dynamodb ?? containerAwsClient())
    : undefined;
  return recordingDeadLetters(
    new SqsDeadLetterSink({ client: sqs, queueUrl: env.DEAD_LETTER_QUEUE_URL }),
    dynamodb && env.INBOX_TABLE
      ? {
          failures: new DynamoFailureLog(dynamodb, env.INBOX_TABLE),
          group: env.GROUP_NAME,
          ttlSeconds: Math.round(env.INBOX_TTL_DAYS * 24 * 3600),
          clock: options.clock ?? systemClock,
          onRecordFailed: (e: unknown) =>
            logger.warn("could not record the dead letter for tracing", { error: describe(e) }),
        }
      : undefined,
  );
}

/**
 * The buffer records as dispatch items. A record that is not an EventBridge event is
 * dead-lettered at once; when that send fails, the record goes back to the buffer alone
 * (`notDeadLettered`), so the rest of the batch is not held back with it.
 */
async function itemsOf(
  event: SQSEvent,
  deadLetters: DeadLetterSink,
  metrics: Observability["metrics"],
): Promise<{ items: DispatchItem[]; notDeadLettered: string[] }> {
  const items: DispatchItem[] = [];
  const notDeadLettered: string[] = [];
  for (const record of event.Records) {
    let body: unknown;
    try {
      body = JSON.parse(record.body);
    } catch {
      body = undefined;
    }
    const wrapper = EventBridgeEvent.safeParse(body);
    if (!wrapper.success) {
      try {
        await deadLetters.send({
          body: record.body,
          code: "dispatch.not_an_event",
          reason: "buffer message is not an EventBridge event",
        });
        metrics.addMetric("DeadLettered", MetricUnit.Count, 1);
      } catch {
        notDeadLettered.push(record.messageId);
      }
      continue;
    }
    const { detail, source, time, "replay-name": replay } = wrapper.data;
    items.push({
      recordId: record.messageId,
      envelope: detail,
      rawBody: record.body,
      source,
      ...(replay ? { replay: { name: replay, ...(time ? { time } : {}) } } : {}),
    });
  }
  return { items, notDeadLettered };
}
