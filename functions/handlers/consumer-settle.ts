import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { SQSRecord } from "aws-lambda";
import type { AwsClient } from "../adapters/aws/client";
import { extendVisibility } from "../adapters/sqs/visibility";
import { describe, type ErrorInfo } from "../core/errors";
import type { Clock, DeadLetterSink, FailureLog } from "../core/ports";
import { isStreamMessage } from "./consumer-stream";
import type { ConsumerEnv } from "./env";
import { failureRecordOf } from "./failure-record";
import type { Observability } from "./observe";
import { retryDelayFor } from "./retry";

/** What became of a record that failed. */
export interface ConsumerFailure {
  readonly error: ErrorInfo;
  readonly body: string;
  readonly receiveCount: number;
  /**
   * `dead-lettered`: sent to the dead-letter queue now, with its error, and acknowledged (a
   * permanent failure, or the queue's last receive of a transient one); `retrying`: left on the
   * queue, visible again after the backoff.
   */
  readonly outcome: "dead-lettered" | "retrying";
}

export interface SettleWiring {
  readonly env: ConsumerEnv;
  readonly sqs: AwsClient;
  readonly deadLetters: DeadLetterSink;
  /** The queue's maxReceiveCount (undefined: no redrive policy, or not known). */
  readonly receiveLimit: () => Promise<number | undefined>;
  readonly observability: Observability;
  /** Where the failure is recorded for tracing (best effort), kept as long as inbox rows. */
  readonly failures: FailureLog;
  /**
   * Message types whose retries are not recorded (the role's `repeatableTypes`): nothing records
   * them when they apply, so a retry's record would be all a trace shows of one that then applied.
   * Their dead letters are recorded.
   */
  readonly unrecordedRetries?: readonly string[];
  readonly clock: Clock;
}

/**
 * Settles a failed record. Permanent -> the dead-letter queue at once with its code and reason
 * (retries cannot help). Transient -> back on the queue after a backoff; but on the queue's last
 * receive (maxReceiveCount) it goes to the dead-letter queue here, with its last error, instead of
 * being moved there by SQS without a word. A failed dead-letter send leaves the record on its
 * queue, visible again after the backoff. The caller acknowledges a `dead-lettered` record and
 * fails a `retrying` one.
 */
export function failureSettler(wiring: SettleWiring) {
  const settle = settler(wiring);
  const record = failureRecorder(wiring);
  return async (sqsRecord: SQSRecord, error: unknown, receiveCount: number) => {
    const failure = await settle(sqsRecord, error, receiveCount);
    await record(failure);
    return failure;
  };
}

/**
 * Records a failure (retrying with its last error, or dead-lettered) beside the inbox rows, so a
 * trace shows it (a retry of an `unrecordedRetries` type excepted). Best effort: a record that
 * cannot be written is logged and the message's fate stays as settled.
 */
function failureRecorder(wiring: SettleWiring) {
  const { env, failures, clock, observability } = wiring;
  const ttlSeconds = Math.round(env.INBOX_TTL_DAYS * 24 * 3600);
  const unrecorded = new Set(wiring.unrecordedRetries ?? []);
  return async (failure: ConsumerFailure) => {
    const record = failureRecordOf(failure.body, {
      group: env.GROUP_NAME,
      error: failure.error,
      attempts: failure.receiveCount,
      outcome: failure.outcome,
      now: clock.now(),
      ttlSeconds,
    });
    if (!record) return;
    if (record.outcome === "retrying" && unrecorded.has(record.eventType)) return;
    await failures.record(record).catch((e: unknown) =>
      observability.logger.warn("could not record the failure for tracing", {
        error: describe(e),
      }),
    );
  };
}

/** Sends a record to the dead-letter queue: true when it is there now, false leaves it to SQS. */
function deadLetterer({ deadLetters, observability: { logger, metrics } }: SettleWiring) {
  return async (record: SQSRecord, info: ErrorInfo, receiveCount: number) => {
    try {
      await deadLetters.send({
        body: record.body,
        code: info.code,
        reason: info.message,
        groupId: record.attributes.MessageGroupId,
        deduplicationId: record.attributes.MessageDeduplicationId ?? record.messageId,
        receiveCount,
      });
    } catch (e) {
      logger.error("could not dead-letter the message: it stays on its queue", {
        error: describe(e),
      });
      return false;
    }
    metrics.addMetric("DeadLettered", MetricUnit.Count, 1);
    return true;
  };
}

function settler(wiring: SettleWiring) {
  const { env, sqs } = wiring;
  const { logger, metrics } = wiring.observability;
  const deadLetter = deadLetterer(wiring);
  /** The queue's maxReceiveCount when this receive is its last, else undefined. */
  const lastReceive = async (receiveCount: number) => {
    const limit = await wiring.receiveLimit().catch(() => undefined);
    return limit !== undefined && receiveCount >= limit ? limit : undefined;
  };
  return async (record: SQSRecord, error: unknown, receiveCount: number) => {
    const info = describe(error);
    const failure = { error: info, body: record.body, receiveCount };
    if (info.errorClass === "permanent") {
      logger.error("dead-lettering a message that can never succeed", {
        error: info,
        error_class: info.errorClass,
        receive_count: receiveCount,
      });
      if (await deadLetter(record, info, receiveCount))
        return { ...failure, outcome: "dead-lettered" } as const;
      // Not in the dead-letter queue: it comes back after the backoff, as a transient failure.
    } else {
      const limit = await lastReceive(receiveCount);
      if (limit !== undefined) {
        logger.error("dead-lettering a message whose retries are exhausted", {
          error: info,
          error_class: info.errorClass,
          receive_count: receiveCount,
          max_receive_count: limit,
        });
        if (await deadLetter(record, info, receiveCount))
          return { ...failure, outcome: "dead-lettered" } as const;
      }
    }
    metrics.addMetric("Retried", MetricUnit.Count, 1);
    // A stream record is retried by the stream, with its batch: there is no message to hold back.
    if (isStreamMessage(record)) {
      logger.warn("will retry with the stream batch", {
        error: info,
        error_class: info.errorClass,
      });
      return { ...failure, outcome: "retrying" } as const;
    }
    const delay = retryDelayFor(error, receiveCount, env.RETRY_BASE_SECONDS, env.RETRY_MAX_SECONDS);
    logger.warn("will retry", {
      error: info,
      error_class: info.errorClass,
      receive_count: receiveCount,
      retry_in_seconds: delay,
    });
    await extendVisibility(sqs, env.QUEUE_URL, record.receiptHandle, delay).catch((e: unknown) =>
      logger.warn("could not set the retry backoff", { error: describe(e) }),
    );
    return { ...failure, outcome: "retrying" } as const;
  };
}
