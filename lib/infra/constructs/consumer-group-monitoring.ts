import { Duration } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  MathExpression,
  Metric,
  type MetricOptions,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import type { DiscardReason } from "../../../functions/core/ports";
import { ALARM_ACTIONS } from "./alarm-commands";
import type { GroupQueues } from "./consumer-group-queues";
import type { ConsumerGroupSettings } from "./consumer-group-settings";
import { METRICS_NAMESPACE } from "./function";

/**
 * What a consumer group is watched by: the metrics its consumer publishes
 * (functions/handlers/consumer-metrics.ts) and SQS's metrics of its queues, and the alarms on
 * them. Every alarm's description says what happened and which operator command shows it.
 */

/**
 * Metrics each consumer publishes per record (functions/handlers/consumer.ts), with dimensions
 * `service` and `consumer_group`, both the group name.
 */
export const CONSUMER_METRICS = [
  "Received",
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
  readonly deadLetterAlarm: Alarm;
  readonly messageAgeAlarm: Alarm;
  readonly bufferDeadLetterAlarm?: Alarm;
  readonly bufferMessageAgeAlarm?: Alarm;
  /** Retries or discards as expired over their share of the deliveries (RATE_THRESHOLDS). */
  readonly deliveryRateAlarm: Alarm;
  /** One alarm per signal the group is watched for (`attention`), by the signal's name. */
  readonly attentionAlarms: Readonly<Record<string, Alarm>>;
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
 * The rates an operator reads beside the queue depth (a falling depth may be messages retried or
 * discarded as expired, not work done): percent of the deliveries of a window (`Received`, one per
 * attempt) that were left for a retry (`Retried`) or discarded as expired (`DiscardedByReason`
 * `expired`); 0 in a window without deliveries. One alarm per group fires when either rate stays
 * above its threshold for `RATE_ALARM_WINDOWS` windows of 5 minutes: one alarm, not two, because
 * a stack holds at most 500 resources and the reference stack's groups take most of them.
 */
export const RATE_THRESHOLDS = { retry: 10, expiry: 5 } as const;
export const RATE_ALARM_WINDOWS = 3;

/** `100 * <part> / Received` over 5-minute windows, 0 where nothing was received. */
export function deliveryRate(
  groupName: string,
  partId: string,
  part: Metric,
  label: string,
): MathExpression {
  return new MathExpression({
    expression: `IF(received > 0, 100 * ${partId} / received, 0)`,
    usingMetrics: { [partId]: part, received: consumerMetric(groupName, "Received") },
    label,
    period: Duration.minutes(5),
  });
}

/** Percent of deliveries left for a retry. */
export function retryRate(groupName: string): MathExpression {
  return deliveryRate(groupName, "retried", consumerMetric(groupName, "Retried"), "RetryRate (%)");
}

/** Percent of deliveries discarded as expired. */
export function expiryRate(groupName: string): MathExpression {
  const expired = consumerMetric(groupName, "DiscardedByReason", {
    dimensions: { reason: "expired" },
  });
  return deliveryRate(groupName, "expired", expired, "ExpiryRate (%)");
}

/**
 * In `scope` (the group): an alarm on any message in each dead-letter queue, and on a backlog
 * older than `maxMessageAge` in the group's queue and its buffer.
 */
export function createGroupAlarms(
  scope: Construct,
  settings: ConsumerGroupSettings,
  queues: GroupQueues,
  streamIteratorAge?: Metric,
): GroupAlarms {
  const { groupName, delivery } = settings;
  const fifo = queues.queue.fifo;
  const ageDescription = `oldest message waiting longer than ${settings.maxMessageAge.toHumanString()}`;
  const deadLetterAlarm = anyMessageAlarm(
    scope,
    "DeadLetterAlarm",
    queueDepth(queues.deadLetterQueue),
    streamIteratorAge
      ? `${groupName}: messages in the dead-letter queue (events it gave up on, or the stream positions of batches whose retries ran out: rebuild the group). ${ALARM_ACTIONS.deadLetters}.`
      : `${groupName}: messages in the ${fifo ? "FIFO " : ""}dead-letter queue. ${ALARM_ACTIONS.deadLetters}.`,
  );
  // A group read from the stream waits on the stream, not on its queue (fed by redrives only).
  const messageAgeAlarm = streamIteratorAge
    ? ageAlarm(
        scope,
        "IteratorAgeAlarm",
        streamIteratorAge,
        settings.maxMessageAge,
        `${groupName}: more than ${settings.maxMessageAge.toHumanString()} behind the events table stream (it keeps 24 hours). ${ALARM_ACTIONS.backlog}.`,
      )
    : ageAlarm(
        scope,
        "MessageAgeAlarm",
        oldestMessageAge(queues.queue),
        settings.maxMessageAge,
        `${groupName}: ${ageDescription}. ${ALARM_ACTIONS.backlog}.`,
      );
  const attentionAlarms = createAttentionAlarms(scope, settings);
  const deliveryRateAlarm = createRateAlarm(scope, groupName);
  const base = { deadLetterAlarm, messageAgeAlarm, deliveryRateAlarm, attentionAlarms };
  if (!queues.bufferDeadLetterQueue) return base;
  const bufferDeadLetterAlarm = anyMessageAlarm(
    scope,
    "BufferDeadLetterAlarm",
    queueDepth(queues.bufferDeadLetterQueue),
    delivery === "subscriber"
      ? `${groupName}: events the subscriber could not deliver (records name the event, the payload is on the bus). ${ALARM_ACTIONS.deadLetters}.`
      : `${groupName}: events in the buffer dead-letter queue (undeliverable or invalid). ${ALARM_ACTIONS.deadLetters}.`,
  );
  // A subscriber has no buffer: what waits is held on its bus, not in a queue.
  if (!queues.bufferQueue) return { ...base, bufferDeadLetterAlarm };
  const bufferMessageAgeAlarm = ageAlarm(
    scope,
    "BufferMessageAgeAlarm",
    oldestMessageAge(queues.bufferQueue),
    settings.maxMessageAge,
    `${groupName}: buffer ${ageDescription} (${delivery} not keeping up). ${ALARM_ACTIONS.backlog}.`,
  );
  return { ...base, bufferDeadLetterAlarm, bufferMessageAgeAlarm };
}

/** The group's alarm on its retry and expiry rates (RATE_THRESHOLDS): 1 where either is over. */
function createRateAlarm(scope: Construct, groupName: string): Alarm {
  const minutes = RATE_ALARM_WINDOWS * 5;
  const { retry, expiry } = RATE_THRESHOLDS;
  const over = new MathExpression({
    expression: `IF(retry > ${retry} OR expiry > ${expiry}, 1, 0)`,
    usingMetrics: { retry: retryRate(groupName), expiry: expiryRate(groupName) },
    label: `RetryRate over ${retry}% or ExpiryRate over ${expiry}%`,
    period: Duration.minutes(5),
  });
  return new Alarm(scope, "DeliveryRateAlarm", {
    metric: over,
    threshold: 0,
    comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: RATE_ALARM_WINDOWS,
    treatMissingData: TreatMissingData.NOT_BREACHING,
    alarmDescription: `${groupName}: over ${retry}% of deliveries retried, or over ${expiry}% expired before processing, for ${minutes} minutes. ${ALARM_ACTIONS.retries}; ${ALARM_ACTIONS.backlog}.`,
  });
}

/**
 * One alarm per signal the group is watched for, with the words its declaration gives (what
 * happened, why it needs a person, what to run): more than `alarm.tolerated` (default 0)
 * occurrences within `alarm.windowMinutes` (default 5). No data is no occurrence.
 */
function createAttentionAlarms(
  scope: Construct,
  settings: ConsumerGroupSettings,
): Record<string, Alarm> {
  const alarms: Record<string, Alarm> = {};
  for (const { name, metric, alarm } of settings.attention) {
    const period = Duration.minutes(alarm.windowMinutes ?? 5);
    const threshold = alarm.tolerated ?? 0;
    const many = threshold === 0 ? "" : `more than ${threshold} `;
    alarms[name] = new Alarm(scope, alarm.id, {
      metric: consumerMetric(settings.groupName, metric, { period }),
      threshold,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `${settings.groupName}: ${many}${alarm.what} within ${period.toHumanString()} (${alarm.why}). ${alarm.act}.`,
    });
  }
  return alarms;
}

/** Every alarm of a group. */
export function alarmsOf(alarms: GroupAlarms): Alarm[] {
  return [
    alarms.deadLetterAlarm,
    alarms.messageAgeAlarm,
    alarms.deliveryRateAlarm,
    ...(alarms.bufferDeadLetterAlarm ? [alarms.bufferDeadLetterAlarm] : []),
    ...(alarms.bufferMessageAgeAlarm ? [alarms.bufferMessageAgeAlarm] : []),
    ...Object.values(alarms.attentionAlarms),
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
