import { Duration } from "aws-cdk-lib";
import { type AttentionSignal, uniqueSignals } from "../../../functions/core/attention";
import { retentionDays } from "../../../functions/core/retention";
import { registry } from "../../../schemas";
import { signalProblems } from "./attention-signals";
import type { ConsumerGroupProps, ConsumerGroupSubscription } from "./consumer-group-props";
import {
  type Delivery,
  GROUP_NAME_MAX_LENGTH,
  type GroupSettings,
  groupSettingsProblems,
  integerProblem,
  kebabCaseProblem,
  MAX_QUEUE_NAME_LENGTH,
  type Ordering,
  stageProblem,
  withGroupDefaults,
} from "./consumer-group-rules";

/**
 * The settings a consumer group's props become: every default applied and every prop checked
 * here, in one place, before any resource exists (`consumerGroupSettings`). The shared group
 * settings (ordering, delivery, batch size, ...) take their defaults and limits from
 * `consumer-group-rules.ts`, as the topology does.
 */

/** A group's props with every default applied, checked. */
export interface ConsumerGroupSettings extends GroupSettings {
  readonly groupName: string;
  readonly stage: string;
  /** `agentbus-<stage>-<group>`: the start of every physical name of the group. */
  readonly prefix: string;
  readonly queueNames: QueueNames;
  readonly maxBatchingWindow: Duration | undefined;
  readonly deliveryBatchingWindow: Duration | undefined;
  readonly retryBaseSeconds: number;
  readonly retryMaxSeconds: number;
  readonly inboxTtlDays: number;
  readonly maxMessageAge: Duration;
  readonly ruleRetryAttempts: number;
  readonly ruleMaxEventAge: Duration;
  /** The signals the group is watched for, each once by name. */
  readonly attention: readonly AttentionSignal[];
  /** ConsumerGroupProps.unsequencedOnly. */
  readonly unsequencedOnly: boolean;
}

/** The physical names of a group's queues (buffer queues only for FIFO groups). */
export interface QueueNames {
  readonly queue: string;
  readonly deadLetterQueue: string;
  readonly bufferQueue: string | undefined;
  readonly bufferDeadLetterQueue: string | undefined;
}

/** Settings of the delivery hop that are not props: it only moves messages. */
export const DISPATCH_TIMEOUT = Duration.seconds(30);
export const DISPATCH_BATCH_SIZE = 10;
/**
 * Concurrent dispatch invocations per group (the event source's MaximumConcurrency). A standard
 * queue's event source otherwise scales by up to 300 concurrent invocations a minute until it
 * holds the account's concurrency (1,000 by default), so one group's burst would starve every
 * consumer; at 20 a dozen groups' dispatchers hold at most a quarter of it. Each invocation moves up
 * to 10 messages in one SendMessageBatch of a few tens of milliseconds, so 20 move thousands of
 * events a second into the group's FIFO queue (high-throughput mode takes far more): more than
 * the group's own consumers, held to their `maxConcurrency`, take out of it.
 */
export const DISPATCH_MAX_CONCURRENCY = 20;
/** Messages the pipe reads from the buffer per batch. */
export const PIPE_BATCH_SIZE = 10;

/** SQS cannot keep a message invisible for 12 hours or more. */
const MAX_RETRY_SECONDS = 12 * 60 * 60 - 1;
/** EventBridge Pipe names are at most 64 characters. */
const MAX_PIPE_NAME_LENGTH = 64;

type Problems = (string | undefined)[];

/** What a group's queues' names start with (`queueNames`). */
export function groupQueuePrefix(stage: string, groupName: string): string {
  return `agentbus-${stage}-${groupName}`;
}

/**
 * Defaults applied and every prop checked before any resource exists; throws naming every
 * problem at once.
 */
export function consumerGroupSettings(props: ConsumerGroupProps): ConsumerGroupSettings {
  const groupName = props.groupName;
  const nameProblem = kebabCaseProblem("consumer group name", groupName, GROUP_NAME_MAX_LENGTH);
  if (nameProblem) throw new Error(nameProblem);
  const stage = props.stage ?? "dev";
  const prefix = groupQueuePrefix(stage, groupName);
  const group = withGroupDefaults({
    ordering: props.ordering,
    delivery: props.delivery,
    orderKey: props.orderKey,
    batchSize: props.batchSize,
    maxConcurrency: props.maxConcurrency,
    tenantConcurrency: props.tenantConcurrency,
    maxReceiveCount: props.maxReceiveCount,
    functionTimeout: props.functionTimeout,
    visibilityTimeout: props.visibilityTimeout,
  });
  const names = queueNames(prefix, group.ordering, group.delivery);
  const problems: Problems = [
    stageProblem(stage),
    ...groupSettingsProblems(group),
    ...subscriptionProblems(props.subscriptions),
    ...placementProblems(props, group, prefix, names),
  ];
  const batching = batchingWindowOf(props.maxBatchingWindow, group, problems);
  const deliveryBatching = deliveryBatchingWindowOf(props.deliveryBatchingWindow, group, problems);
  const consumer = consumerSettings(props, problems);
  const monitoring = monitoringSettings(props, problems);
  problems.push(...signalProblems(props.attention ?? []));

  const found = problems.filter((p): p is string => p !== undefined);
  if (found.length > 0) {
    throw new Error(`consumer group ${groupName}: ${found.join("; ")}`);
  }
  return {
    groupName,
    stage,
    prefix,
    queueNames: names,
    ...group,
    maxBatchingWindow: batching,
    deliveryBatchingWindow: deliveryBatching,
    ...consumer,
    ...monitoring,
    attention: uniqueSignals(props.attention ?? []),
    unsequencedOnly: props.unsequencedOnly === true,
  };
}

/** The physical names of a group's queues (buffer queues only for FIFO groups). */
export function queueNames(
  prefix: string,
  ordering: Ordering,
  delivery: Delivery = "dispatch-function",
): QueueNames {
  // A group read from the stream keeps standard queues: only a redrive of its dead letters feeds it.
  const fifo = hasFifoQueues({ ordering, delivery });
  return {
    queue: fifo ? `${prefix}.fifo` : prefix,
    deadLetterQueue: fifo ? `${prefix}-dlq.fifo` : `${prefix}-dlq`,
    bufferQueue: fifo && delivery !== "subscriber" ? `${prefix}-buffer` : undefined,
    bufferDeadLetterQueue: fifo ? `${prefix}-buffer-dlq` : undefined,
  };
}

/**
 * Whether a group's queues are FIFO: an ordered group's, except when it reads the events table's
 * stream (its order comes from the stream and the version gate, and its queue only takes redriven
 * dead letters).
 */
export function hasFifoQueues(group: Pick<GroupSettings, "ordering" | "delivery">): boolean {
  return group.ordering === "fifo" && group.delivery !== "stream";
}

/** A given dead-letter queue of the wrong kind; physical names longer than AWS allows. */
function placementProblems(
  props: ConsumerGroupProps,
  group: GroupSettings,
  prefix: string,
  names: QueueNames,
): Problems {
  const problems: Problems = [];
  if (props.deadLetterQueue && props.deadLetterQueue.fifo !== hasFifoQueues(group)) {
    problems.push(
      hasFifoQueues(group)
        ? `deadLetterQueue ${props.deadLetterQueue.node.path} is a standard queue: the dead-letter queue of a FIFO queue must be FIFO`
        : `deadLetterQueue ${props.deadLetterQueue.node.path} is a FIFO queue: the dead-letter queue of a standard queue must be standard`,
    );
  }
  for (const queueName of Object.values(names)) {
    if (queueName && queueName.length > MAX_QUEUE_NAME_LENGTH) {
      problems.push(
        `queue name ${JSON.stringify(queueName)} is ${queueName.length} characters, SQS allows ${MAX_QUEUE_NAME_LENGTH} (shorten the stage or the group name)`,
      );
    }
  }
  if (group.delivery === "pipe" && prefix.length > MAX_PIPE_NAME_LENGTH) {
    problems.push(
      `pipe name ${JSON.stringify(prefix)} is ${prefix.length} characters, EventBridge allows ${MAX_PIPE_NAME_LENGTH} (shorten the stage or the group name)`,
    );
  }
  return problems;
}

/** The consumer event source's batching window: standard queues only; 1 s for batches over 10. */
function batchingWindowOf(
  given: Duration | undefined,
  group: GroupSettings,
  problems: Problems,
): Duration | undefined {
  if (given !== undefined && hasFifoQueues(group)) {
    problems.push(`maxBatchingWindow ${given.toHumanString()} is not supported on a FIFO queue`);
    return given;
  }
  if (given !== undefined) {
    const seconds = given.toSeconds();
    problems.push(integerProblem("maxBatchingWindow (seconds)", seconds, 0, 300));
    if (group.batchSize > 10 && seconds < 1) {
      problems.push(
        `maxBatchingWindow ${seconds}s must be at least 1s with batchSize ${group.batchSize} (over 10)`,
      );
    }
    return given;
  }
  // A stream event source needs no window for large batches: it reads what the shard holds.
  return group.ordering === "none" && group.batchSize > 10 ? Duration.seconds(1) : undefined;
}

/** The delivery hop's batching window: FIFO groups only (the others have no delivery hop). */
function deliveryBatchingWindowOf(
  given: Duration | undefined,
  group: GroupSettings,
  problems: Problems,
): Duration | undefined {
  if (given === undefined) return undefined;
  if (group.ordering !== "fifo") {
    problems.push(
      `deliveryBatchingWindow ${given.toHumanString()} needs a FIFO group (an unordered group has no delivery hop)`,
    );
    return given;
  }
  if (group.delivery === "relay") {
    problems.push(
      `deliveryBatchingWindow ${given.toHumanString()} needs delivery "dispatch-function" or "pipe" (the relay sends a "relay" group's stored events as it reads them; only a dispatch function or a pipe gathers batches)`,
    );
    return given;
  }
  if (group.delivery === "subscriber" || group.delivery === "stream") {
    problems.push(
      `deliveryBatchingWindow ${given.toHumanString()} needs delivery "dispatch-function" or "pipe" (a ${group.delivery} has no buffer to gather from; a stream group's own window is maxBatchingWindow)`,
    );
    return given;
  }
  problems.push(integerProblem("deliveryBatchingWindow (seconds)", given.toSeconds(), 0, 300));
  return given;
}

/** What the consumer's environment carries: retry backoff and inbox retention. */
function consumerSettings(props: ConsumerGroupProps, problems: Problems) {
  const retryBaseSeconds = props.retryBaseSeconds ?? 2;
  problems.push(integerProblem("retryBaseSeconds", retryBaseSeconds, 1, MAX_RETRY_SECONDS));
  const retryMaxSeconds = props.retryMaxSeconds ?? Math.max(300, retryBaseSeconds);
  problems.push(
    integerProblem(
      "retryMaxSeconds",
      retryMaxSeconds,
      retryBaseSeconds,
      MAX_RETRY_SECONDS,
      ` (from retryBaseSeconds ${retryBaseSeconds} to 12 h - 1 s)`,
    ),
  );
  const inboxTtl = props.inboxTtl ?? Duration.days(retentionDays("inboxRows"));
  const inboxTtlDays = inboxTtl.toHours() / 24;
  if (!Number.isInteger(inboxTtlDays) || inboxTtlDays < 1) {
    problems.push(
      `inboxTtl ${inboxTtl.toHumanString()} must be a whole number of days, at least 1`,
    );
  }
  return { retryBaseSeconds, retryMaxSeconds, inboxTtlDays };
}

/** Alarm thresholds and the rule targets' retry policy. */
function monitoringSettings(props: ConsumerGroupProps, problems: Problems) {
  const maxMessageAge = props.maxMessageAge ?? Duration.minutes(5);
  problems.push(integerProblem("maxMessageAge (seconds)", maxMessageAge.toSeconds(), 1, 1_209_600));
  const ruleRetryAttempts = props.ruleRetryAttempts ?? 185;
  problems.push(integerProblem("ruleRetryAttempts", ruleRetryAttempts, 0, 185));
  const ruleMaxEventAge = props.ruleMaxEventAge ?? Duration.hours(24);
  problems.push(
    integerProblem("ruleMaxEventAge (seconds)", ruleMaxEventAge.toSeconds(), 60, 86_400),
  );
  return { maxMessageAge, ruleRetryAttempts, ruleMaxEventAge };
}

/** Each subscribed type must be registered, on the topic it is subscribed from. */
function subscriptionProblems(subscriptions: readonly ConsumerGroupSubscription[]): string[] {
  if (subscriptions.length === 0) return ["subscriptions must not be empty"];
  const problems: string[] = [];
  const definitions = registry.definitions();
  const topics = new Set<string>();
  const seen = new Set<string>();
  for (const { topic, eventTypes } of subscriptions) {
    if (topics.has(topic.topicName)) {
      problems.push(
        `topic ${JSON.stringify(topic.topicName)} appears in two subscriptions (merge them: one rule per topic)`,
      );
    }
    topics.add(topic.topicName);
    if (eventTypes.length === 0) {
      problems.push(
        `subscription to topic ${JSON.stringify(topic.topicName)} lists no event types`,
      );
    }
    for (const type of eventTypes) {
      const onTopics = [...new Set(definitions.filter((d) => d.type === type).map((d) => d.topic))];
      if (onTopics.length === 0) {
        problems.push(`event type ${JSON.stringify(type)} is not in the registry`);
      } else if (!onTopics.includes(topic.topicName)) {
        problems.push(
          `event type ${JSON.stringify(type)} is published on topic ${onTopics.map((t) => JSON.stringify(t)).join(", ")}, not ${JSON.stringify(topic.topicName)}`,
        );
      }
      if (seen.has(type)) problems.push(`event type ${JSON.stringify(type)} is subscribed twice`);
      seen.add(type);
    }
  }
  return problems;
}
