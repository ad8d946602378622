import { Duration } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  type IAlarm,
  Metric,
  type MetricOptions,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import type { DiscardReason } from "../../functions/core/ports";
import type { GroupQueues } from "./consumer-group-queues";
import type { ConsumerGroupSettings } from "./consumer-group-settings";
import { METRICS_NAMESPACE } from "./function";

/**
 * What a consumer group is watched by: the metrics its consumer publishes and SQS's metrics of
 * its queues, and the alarms on them.
 */

/**
 * Metrics each consumer publishes per record (functions/handlers/consumer.ts), with dimensions
 * `service` and `consumer_group`, both the group name.
 */
export const CONSUMER_METRICS = [
  "Applied",
  "Duplicate",
  "Discarded",
  "Rejected",
  "DeadLettered",
  "Retried",
  "GapRepaired",
] as const;
export type ConsumerMetric = (typeof CONSUMER_METRICS)[number];

const REASONS: Record<DiscardReason, true> = {
  expired: true,
  superseded: true,
  cancelled: true,
  invalidated_by_state_change: true,
};
/** Values of the `reason` dimension of `DiscardedByReason`. */
export const DISCARD_REASONS = Object.keys(REASONS) as DiscardReason[];

/** The alarms of a group (buffer alarms only for FIFO groups). */
export interface GroupAlarms {
  readonly deadLetterAlarm: IAlarm;
  readonly messageAgeAlarm: IAlarm;
  readonly bufferDeadLetterAlarm?: IAlarm;
  readonly bufferMessageAgeAlarm?: IAlarm;
}

/**
 * A metric the group's consumer publishes (namespace `AgentBus`, dimensions `service` and
 * `consumer_group`; Sum over 5 minutes), with more dimensions when given.
 */
export function consumerMetric(
  groupName: string,
  metricName: string,
  options?: MetricOptions & { readonly dimensions?: Record<string, string> },
): Metric {
  const { dimensions, ...rest } = options ?? {};
  return new Metric({
    namespace: METRICS_NAMESPACE,
    metricName,
    dimensionsMap: { service: groupName, consumer_group: groupName, ...dimensions },
    statistic: "Sum",
    period: Duration.minutes(5),
    ...rest,
  });
}

/** Messages waiting in a queue (Maximum, 1 minute). */
export function queueDepth(queue: IQueue, options?: MetricOptions): Metric {
  return queue.metricApproximateNumberOfMessagesVisible({
    statistic: "Maximum",
    period: Duration.minutes(1),
    ...options,
  });
}

/** Age of the oldest message waiting in a queue (Maximum, 1 minute). */
export function oldestMessageAge(queue: IQueue, options?: MetricOptions): Metric {
  return queue.metricApproximateAgeOfOldestMessage({
    statistic: "Maximum",
    period: Duration.minutes(1),
    ...options,
  });
}

/**
 * In `scope` (the group): an alarm on any message in each dead-letter queue, and on a backlog
 * older than `maxMessageAge` in the group's queue and its buffer.
 */
export function createGroupAlarms(
  scope: Construct,
  settings: ConsumerGroupSettings,
  queues: GroupQueues,
): GroupAlarms {
  const { groupName, delivery } = settings;
  const fifo = settings.ordering === "fifo";
  const ageDescription = `oldest message waiting longer than ${settings.maxMessageAge.toHumanString()}`;
  const deadLetterAlarm = anyMessageAlarm(
    scope,
    "DeadLetterAlarm",
    queueDepth(queues.deadLetterQueue),
    `${groupName}: messages in the ${fifo ? "FIFO " : ""}dead-letter queue`,
  );
  const messageAgeAlarm = ageAlarm(
    scope,
    "MessageAgeAlarm",
    oldestMessageAge(queues.queue),
    settings.maxMessageAge,
    `${groupName}: ${ageDescription}`,
  );
  if (!queues.bufferQueue || !queues.bufferDeadLetterQueue)
    return { deadLetterAlarm, messageAgeAlarm };
  const bufferDeadLetterAlarm = anyMessageAlarm(
    scope,
    "BufferDeadLetterAlarm",
    queueDepth(queues.bufferDeadLetterQueue),
    `${groupName}: events in the buffer dead-letter queue (undeliverable or invalid)`,
  );
  const bufferMessageAgeAlarm = ageAlarm(
    scope,
    "BufferMessageAgeAlarm",
    oldestMessageAge(queues.bufferQueue),
    settings.maxMessageAge,
    `${groupName}: buffer ${ageDescription} (${delivery} not keeping up)`,
  );
  return { deadLetterAlarm, messageAgeAlarm, bufferDeadLetterAlarm, bufferMessageAgeAlarm };
}

/** Every alarm of a group. */
export function alarmsOf(alarms: GroupAlarms): IAlarm[] {
  return [
    alarms.deadLetterAlarm,
    alarms.messageAgeAlarm,
    ...(alarms.bufferDeadLetterAlarm ? [alarms.bufferDeadLetterAlarm] : []),
    ...(alarms.bufferMessageAgeAlarm ? [alarms.bufferMessageAgeAlarm] : []),
  ];
}

function anyMessageAlarm(scope: Construct, id: string, metric: Metric, description: string) {
  return new Alarm(scope, id, {
    metric,
    threshold: 0,
    comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: TreatMissingData.NOT_BREACHING,
    alarmDescription: description,
  });
}

function ageAlarm(
  scope: Construct,
  id: string,
  metric: Metric,
  maxAge: Duration,
  description: string,
) {
  return new Alarm(scope, id, {
    metric,
    threshold: maxAge.toSeconds(),
    comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: TreatMissingData.NOT_BREACHING,
    alarmDescription: description,
  });
}
