import type {
  Context,
  DynamoDBBatchResponse,
  DynamoDBStreamEvent,
  SQSBatchResponse,
  SQSEvent,
  SQSRecord,
} from "aws-lambda";
import { registry as defaultRegistry, type EventRegistry } from "../../schemas";
import type { AwsClient } from "../adapters/aws/client";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoFailureLog } from "../adapters/dynamodb/failure-log";
import { meterModelCalls } from "../adapters/model-calls";
import { SqsDeadLetterSink } from "../adapters/sqs/dead-letter-sink";
import { queueReceiveLimit } from "../adapters/sqs/receive-limit";
import type { AttentionRule } from "../core/attention";
import { BatchFoldingStore } from "../core/batch-fold";
import { parseEnv } from "../core/parse-env";
import { consume } from "../core/pipeline";
import type { Clock, ConsumerDeps } from "../core/ports";
import type { Delivery, ReplayMark } from "../core/replay";
import type { ConsumeResult, Role } from "../core/role";
import { systemClock, ulidSource } from "../core/runtime";
import { containerAwsClient } from "./aws";
import { processBatch } from "./consumer-batch";
import { modelCallMetrics, recordConsumed, recordLag, recordReceived } from "./consumer-metrics";
import { appendLogKeys, decodeDelivery } from "./consumer-record";
import { type ConsumerFailure, failureSettler } from "./consumer-settle";
import { isStreamEvent, processStreamBatch } from "./consumer-stream";
import { ConsumerEnv } from "./env";
import { heartbeatFor } from "./heartbeat";
import { lambdaEntry } from "./lambda-entry";
import { type Observability, observability } from "./observe";
import { receiveCountOf } from "./retry";
import { inMessageSpan, traceParentOf } from "./telemetry";
import { vaultOf } from "./vault";

export type { ConsumerFailure } from "./consumer-settle";

/** Told what became of each record (the local runtime builds its trace from it). */
export interface ConsumerObserver {
  /** The record went through the pipeline: what happened to it and to any gap repairs. */
  consumed?(result: ConsumeResult): void;
  /** The record failed: dead-lettered now, or left for a retry. */
  failed?(failure: ConsumerFailure): void;
}

export interface ConsumerOptions {
  readonly env?: Record<string, string | undefined>;
  readonly dynamodb?: AwsClient;
  readonly sqs?: AwsClient;
  /** Publishes the role's heartbeats (with `HEARTBEAT_SECONDS` and `EVENTS_BUS_NAME`). */
  readonly eventbridge?: AwsClient;
  /** Makes and unwraps the customers' data keys (with `CUSTOMER_KEYS_*`: ./vault). */
  readonly kms?: AwsClient;
  readonly clock?: Clock;
  readonly registry?: EventRegistry;
  readonly observability?: Observability;
  readonly observer?: ConsumerObserver;
  /**
   * The rules of what the role emits that a person must act on (its module's
   * `deployment.attention`): each emitted event that raises a signal is counted under its metric.
   * @default none
   */
  readonly attention?: readonly AttentionRule[];
}

/**
 * A consumer's Lambda handler: a batch of its queue's messages, or of the events table's stream
 * records (`delivery: "stream"`), answered with the partial batch response.
 */
export type SqsBatchHandler = (
  event: SQSEvent | DynamoDBStreamEvent,
  context?: Context,
) => Promise<SQSBatchResponse | DynamoDBBatchResponse>;

/**
 * The Lambda side of a consumer group: every record of a batch goes through the shared pipeline
 * with the role's decision function (./consumer-batch for the batch and FIFO rules,
 * ./consumer-stream for a batch of the events table's stream records,
 * ./consumer-settle for what a failure becomes, ./heartbeat for long work, ./consumer-metrics
 * for what each record and model call publishes). This function only wires: the environment
 * once, the clients once, the pipeline's ports.
 */
export function createConsumerHandler<S>(
  role: Role<S>,
  options: ConsumerOptions = {},
): SqsBatchHandler {
  const wired = wire(role, options);
  const { env, obs, sqs, deps } = wired;
  const modelCalls = modelCallMetrics(obs.metrics);
  const queue = { sqs, url: env.QUEUE_URL, logger: obs.logger };
  const handleRecordWith = recordHandler(role, wired, options);
  const handleRecord = handleRecordWith(deps);
  // A stream batch's writes to one aggregate are folded into one (core/batch-fold.ts).
  const handleStreamBatch = (event: DynamoDBStreamEvent) => {
    const fold = new BatchFoldingStore(deps.store, deps.clock);
    return processStreamBatch(event, handleRecordWith({ ...deps, store: fold }), fold);
  };

  return async (event, context) => {
    await obs.telemetry.ready;
    try {
      return await meterModelCalls(modelCalls, () =>
        isStreamEvent(event)
          ? handleStreamBatch(event)
          : processBatch(event, context, handleRecord, queue),
      );
    } finally {
      obs.metrics.publishStoredMetrics();
      await obs.telemetry.flush();
    }
  };
}

/**
 * One record through the pipeline on the given ports, in its span, with its metrics and logs; a
 * failure settled (./consumer-settle), thrown on only when the record is left to retry.
 */
function recordHandler<S>(
  role: Role<S>,
  { env, obs, withHeartbeat, settle, receiveLimit }: ReturnType<typeof wire<S>>,
  options: ConsumerOptions,
) {
  const ttls = {
    inboxTtlSeconds: Math.round(env.INBOX_TTL_DAYS * 24 * 3600),
    keptMessageTtlSeconds: Math.round(env.KEPT_MESSAGE_DAYS * 24 * 3600),
  };
  const observer = options.observer ?? {};
  const attention = options.attention ?? [];

  const consumeDelivery = async (
    record: SQSRecord,
    delivery: Delivery,
    receiveCount: number,
    deps: ConsumerDeps,
  ) => {
    const { envelope: raw, replay } = delivery;
    const startedAt = deps.clock.now();
    recordLag(obs.metrics, raw, startedAt);
    const lastAttempt = await isLastAttempt(role, raw, receiveLimit, receiveCount);
    const result = await withHeartbeat(record, raw, () =>
      consume(raw, role, deps, { receiveCount, ...ttls, replay, lastAttempt }),
    );
    if (result.steps.at(-1)?.pastHorizon) logPastHorizon(obs, replay, env.INBOX_TTL_DAYS);
    recordConsumed(result, deps.clock.now().getTime() - startedAt.getTime(), obs, attention);
    observer.consumed?.(result);
  };

  return (deps: ConsumerDeps) =>
    async (record: SQSRecord): Promise<void> => {
      const receiveCount = receiveCountOf(record);
      recordReceived(obs.metrics);
      try {
        const delivery = decodeDelivery(record);
        const ids = appendLogKeys(obs.logger, delivery.envelope, receiveCount);
        const message = { ids, traceparent: traceParentOf(delivery.envelope) };
        await inMessageSpan(message, { group: role.group, messageId: record.messageId }, () =>
          consumeDelivery(record, delivery, receiveCount, deps),
        );
      } catch (error) {
        const failure = await settle(record, error, receiveCount);
        observer.failed?.(failure);
        if (failure.outcome === "retrying") throw error;
      } finally {
        obs.logger.resetKeys();
      }
    };
}

/**
 * True when the queue will not hand the record out again: asked only of a role with failure facts
 * (`Role.failed`) or for a message that waits for a state's version (`required_version`, which
 * gives up on the last attempt), so other records never read the queue's redrive policy for it.
 */
async function isLastAttempt<S>(
  role: Role<S>,
  raw: unknown,
  receiveLimit: () => Promise<number | undefined>,
  receiveCount: number,
): Promise<boolean> {
  const waits = typeof raw === "object" && raw !== null && "required_version" in raw;
  if (!role.failed && !waits) return false;
  const limit = await receiveLimit().catch(() => undefined);
  return limit !== undefined && receiveCount >= limit;
}

/** Why a replayed message was discarded unapplied, in words an operator searches the logs for. */
function logPastHorizon(obs: Observability, replay: ReplayMark | undefined, days: number): void {
  obs.logger.warn(
    `replayed unsequenced message older than the dedup horizon (${days} days) discarded as expired: its record of the id may be gone, so the group cannot tell whether it already applied it`,
    { replay_name: replay?.name, replay_event_time: replay?.time },
  );
}

/** Everything a consumer needs, built once per container from its environment and options. */
function wire<S>(role: Role<S>, options: ConsumerOptions) {
  const env = parseEnv(ConsumerEnv, options.env ?? process.env, `consumer ${role.group}`);
  if (env.GROUP_NAME !== role.group)
    throw new Error(`GROUP_NAME is ${env.GROUP_NAME} but the handler's role is ${role.group}`);
  const clock = options.clock ?? systemClock;
  const obs = options.observability ?? observability(role.group, role.group);
  const dynamodb = obs.tracer.capture(options.dynamodb ?? containerAwsClient());
  const sqs = obs.tracer.capture(options.sqs ?? containerAwsClient());
  const kms = obs.tracer.capture(options.kms ?? containerAwsClient());
  const vault = vaultOf(options.env ?? process.env, { dynamodb, kms }, clock);
  const registry = options.registry ?? defaultRegistry;
  const store = new DynamoConsumerStore({
    client: dynamodb,
    tables: { state: env.STATE_TABLE, events: env.EVENTS_TABLE, inbox: env.INBOX_TABLE },
    clock,
    legacyCheckpoints: env.LEGACY_CHECKPOINTS,
    ...(vault ? { vault } : {}),
    registry,
  });
  const deps: ConsumerDeps = {
    store,
    registry,
    clock,
    ids: ulidSource(clock),
    ...(vault ? { personalData: vault } : {}),
  };
  const heartbeatWiring = { env, sqs, eventbridge: options.eventbridge, deps, observability: obs };
  const receiveLimit = queueReceiveLimit(sqs, env.QUEUE_URL);
  const settle = failureSettler({
    env,
    sqs,
    deadLetters: new SqsDeadLetterSink({ client: sqs, queueUrl: env.DEAD_LETTER_QUEUE_URL }),
    receiveLimit,
    observability: obs,
    failures: new DynamoFailureLog(dynamodb, env.INBOX_TABLE),
    ...(role.repeatableTypes ? { unrecordedRetries: role.repeatableTypes } : {}),
    clock,
  });
  const withHeartbeat = heartbeatFor(role, heartbeatWiring);
  return { env, obs, sqs, deps, withHeartbeat, settle, receiveLimit };
}

/** `create` and the Lambda `handler` of a role that needs nothing but the consumer. */
export function consumerEntry<S>(role: Role<S>) {
  return lambdaEntry((options?: ConsumerOptions) => createConsumerHandler(role, options));
}
