import { Duration } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  Metric,
  type MetricOptions,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import type { DiscardReason } from "../../../functions/core/ports";
import {
  ATTENTION_METRICS,
  type AttentionSignal,
} from "../../../functions/handlers/consumer-metrics";
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
  /** One alarm per signal the group is watched for (`attention`). */
  readonly attentionAlarms: Readonly<Partial<Record<AttentionSignal, Alarm>>>;
}

/** The alarm id and description (what happened, why it matters, what to run) of each signal. */
const ATTENTION_ALARMS: Readonly<
  Record<AttentionSignal, { id: string; what: string; why: string; act: string }>
> = {
  "unknown-side-effects": {
    id: "UnknownSideEffectAlarm",
    what: "sends whose outcome stayed unknown",
    why: "the customer may or may not have the reply",
    act: ALARM_ACTIONS.unknownSideEffects,
  },
  "held-replies": {
    id: "HeldReplyAlarm",
    what: "replies held for review",
    why: "nothing is sent until a person decides",
    act: ALARM_ACTIONS.heldReplies,
  },
  "failed-runs": {
    id: "FailedRunAlarm",
    what: "workflow runs failed",
    why: "no node completed",
    act: ALARM_ACTIONS.failedRuns,
  },
  "partial-runs": {
    id: "PartialRunAlarm",
    what: "workflow runs ended PARTIAL",
    why: "some nodes did not complete",
    act: ALARM_ACTIONS.failedRuns,
  },
  "needs-human": {
    id: "NeedsHumanAlarm",
    what: "agent runs ended NEEDS_HUMAN",
    why: "the run waits for a person",
    act: ALARM_ACTIONS.needsHuman,
  },
  "awaiting-approval": {
    id: "AwaitingApprovalAlarm",
    what: "approvals requested",
    why: "BLOCKED until a person decides or the deadline passes",
    act: ALARM_ACTIONS.awaitingApproval,
  },
  "handed-off": {
    id: "HandedOffAlarm",
    what: "support turns handed off to a person",
    why: 'the customer was told "a member of our team will get back to you"',
    act: ALARM_ACTIONS.handedOff,
  },
};

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
    `${groupName}: messages in the ${fifo ? "FIFO " : ""}dead-letter queue. ${ALARM_ACTIONS.deadLetters}.`,
  );
  const messageAgeAlarm = ageAlarm(
    scope,
    "MessageAgeAlarm",
    oldestMessageAge(queues.queue),
    settings.maxMessageAge,
    `${groupName}: ${ageDescription}. ${ALARM_ACTIONS.backlog}.`,
  );
  const attentionAlarms = createAttentionAlarms(scope, settings);
  if (!queues.bufferDeadLetterQueue) return { deadLetterAlarm, messageAgeAlarm, attentionAlarms };
  const bufferDeadLetterAlarm = anyMessageAlarm(
    scope,
    "BufferDeadLetterAlarm",
    queueDepth(queues.bufferDeadLetterQueue),
    delivery === "subscriber"
      ? `${groupName}: events the subscriber could not deliver (records name the event, the payload is on the bus). ${ALARM_ACTIONS.deadLetters}.`
      : `${groupName}: events in the buffer dead-letter queue (undeliverable or invalid). ${ALARM_ACTIONS.deadLetters}.`,
  );
  // A subscriber has no buffer: what waits is held on its bus, not in a queue.
  if (!queues.bufferQueue)
    return { deadLetterAlarm, messageAgeAlarm, bufferDeadLetterAlarm, attentionAlarms };
  const bufferMessageAgeAlarm = ageAlarm(
    scope,
    "BufferMessageAgeAlarm",
    oldestMessageAge(queues.bufferQueue),
    settings.maxMessageAge,
    `${groupName}: buffer ${ageDescription} (${delivery} not keeping up). ${ALARM_ACTIONS.backlog}.`,
  );
  return {
    deadLetterAlarm,
    messageAgeAlarm,
    bufferDeadLetterAlarm,
    bufferMessageAgeAlarm,
    attentionAlarms,
  };
}

/**
 * One alarm per signal the group is watched for: any occurrence within 5 minutes, or for held
 * replies more than `maxHeldReplies` within `heldReplyWindow`. No data is no occurrence.
 */
function createAttentionAlarms(
  scope: Construct,
  settings: ConsumerGroupSettings,
): Partial<Record<AttentionSignal, Alarm>> {
  const alarms: Partial<Record<AttentionSignal, Alarm>> = {};
  for (const signal of settings.attention) {
    const spec = ATTENTION_ALARMS[signal];
    const held = signal === "held-replies";
    const period = held ? settings.heldReplyWindow : Duration.minutes(5);
    const threshold = held ? settings.maxHeldReplies : 0;
    const many = threshold === 0 ? "" : `more than ${threshold} `;
    alarms[signal] = new Alarm(scope, spec.id, {
      metric: consumerMetric(settings.groupName, ATTENTION_METRICS[signal], { period }),
      threshold,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `${settings.groupName}: ${many}${spec.what} within ${period.toHumanString()} (${spec.why}). ${spec.act}.`,
    });
  }
  return alarms;
}

/** Every alarm of a group. */
export function alarmsOf(alarms: GroupAlarms): Alarm[] {
  return [
    alarms.deadLetterAlarm,
    alarms.messageAgeAlarm,
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
