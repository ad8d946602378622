import { CfnResource, Duration } from "aws-cdk-lib";
import type { Alarm, MathExpression, Metric, MetricOptions } from "aws-cdk-lib/aws-cloudwatch";
import type { Rule } from "aws-cdk-lib/aws-events";
import type { CfnSubscriber } from "aws-cdk-lib/aws-eventsv2";
import type { Role } from "aws-cdk-lib/aws-iam";
import type { CfnPipe } from "aws-cdk-lib/aws-pipes";
import type { IQueue, Queue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import type { AttentionSignal } from "../../../functions/core/attention";
import type { DiscardReason } from "../../../functions/core/ports";
import { MODEL_METRICS, TIMING_METRICS } from "../../../functions/handlers/consumer-metrics";
import {
  addConsumerEventSource,
  addStreamEventSource,
  createDeliveryHop,
  createRules,
  type RulePattern,
  rulePatternsOf,
} from "./consumer-group-delivery";
import {
  alarmsOf,
  type ConsumerMetric,
  consumerMetric,
  createGroupAlarms,
  expiryRate,
  oldestMessageAge,
  queueDepth,
  retryRate,
} from "./consumer-group-monitoring";
import type { ConsumerGroupProps } from "./consumer-group-props";
import { createGroupQueues, deadLetterQueuesOf } from "./consumer-group-queues";
import type { Delivery, Ordering } from "./consumer-group-rules";
import { type ConsumerGroupSettings, consumerGroupSettings } from "./consumer-group-settings";
import { createSubscribers } from "./consumer-group-subscribers";
import { AgentBusFunction, METADATA } from "./function";
import { grantModelAccess, type ModelSetting, resolveModelSetting } from "./model-access";

/** What reading the events table's stream needs on `*` (cdk-nag IAM5 acknowledges it). */
const STREAM_UNSCOPED_ACTIONS = {
  "dynamodb:ListStreams":
    "the DynamoDB stream event source needs it; it lists the streams of the account rather than acting on one stream, so it is granted on * (grantStreamRead)",
};

/**
 * A consumer group: every event of its subscribed types, delivered once per group, to one
 * consumer function, with partial batch responses and bounded concurrency.
 *
 * - `ordering: "fifo"` (in order per order key): rule per topic -> buffer queue (+DLQ) ->
 *   dispatch function or EventBridge Pipe -> FIFO queue `<...>.fifo` (+FIFO DLQ) -> consumer;
 *   with `delivery: "subscriber"`, a FIFO subscriber per topic on its new bus -> FIFO queue
 *   (its on-failure records in the buffer DLQ) -> consumer; with `delivery: "stream"` (groups
 *   that emit nothing), the events table's stream -> consumer, filtered to the subscribed types,
 *   and a standard queue (+DLQ, also the stream source's on-failure destination) for redrives.
 * - `ordering: "none"`: rule per topic -> standard queue (+standard DLQ, also the rule target's
 *   DLQ) -> consumer. The rule hands the queue the whole event (the envelope is its `detail`).
 *
 * Alarms fire on any message in any dead-letter queue, on a backlog older than `maxMessageAge`
 * in the group's queue and its buffer, and on what the consumer emits that a person must act on
 * (`attention`: the signals its role declares, functions/core/attention.ts).
 * Every CloudFormation resource of the group carries `agentbus:group` metadata.
 *
 * The parts live beside it: props, defaults and validation in `consumer-group-settings.ts`, the
 * queues in `consumer-group-queues.ts`, rules, delivery hop and event source in
 * `consumer-group-delivery.ts`, metrics and alarms in `consumer-group-monitoring.ts`.
 */
export class ConsumerGroup extends Construct {
  readonly groupName: string;
  readonly ordering: Ordering;
  readonly delivery: Delivery;
  /** Its tenant lanes (`tenantConcurrency`), which its dispatch function or the relay computes. */
  readonly tenantConcurrency?: number;
  /** The group's queue: FIFO (keyed by order key, de-duplicated by event id) or standard. */
  readonly queue: Queue;
  /** Dead-letter queue of `queue` (FIFO for a FIFO group); the consumer also sends permanent failures here. */
  readonly deadLetterQueue: IQueue;
  /** Standard queue the rules deliver to (FIFO groups only). */
  readonly bufferQueue?: Queue;
  /** Dead letters of the rules' targets, of the buffer queue, and invalid envelopes (FIFO groups only). */
  readonly bufferDeadLetterQueue?: Queue;
  /** Every dead-letter queue of the group. */
  readonly deadLetterQueues: readonly IQueue[];
  readonly rules: readonly Rule[];
  /** Moves the buffer into the FIFO queue (`delivery: "dispatch-function"`). */
  readonly dispatcher?: AgentBusFunction;
  /** Moves the buffer into the FIFO queue (`delivery: "pipe"`). */
  readonly pipe?: CfnPipe;
  /** The pipe's role: receive and delete on the buffer, send on the FIFO queue. */
  readonly pipeRole?: Role;
  /** One FIFO subscriber per subscribed topic's new bus (`delivery: "subscriber"`); else empty. */
  readonly subscribers: readonly CfnSubscriber[];
  /** The subscribers' delivery role: send on the FIFO queue and its dead-letter queue. */
  readonly subscriberRole?: Role;
  /**
   * Topic -> the pattern its messages are matched against on that topic's bus (a rule's or a
   * subscriber's) but their source; empty for a group that reads the events table's stream.
   */
  readonly rulePatterns: Readonly<Record<string, RulePattern>>;
  /**
   * `delivery: "relay"`: topic -> the pattern of the group's rule on it but its source, against
   * which the relay matches the stored events it sends to `queue` itself (Relay.deliverTo).
   */
  get relayRules(): Readonly<Record<string, RulePattern>> | undefined {
    return this.delivery === "relay" ? this.rulePatterns : undefined;
  }
  readonly consumer: AgentBusFunction;
  /** The model the consumer calls, if it calls one. */
  get model(): ModelSetting | undefined {
    return this.modelSetting;
  }
  private modelSetting?: ModelSetting;
  readonly deadLetterAlarm: Alarm;
  readonly bufferDeadLetterAlarm?: Alarm;
  readonly messageAgeAlarm: Alarm;
  readonly bufferMessageAgeAlarm?: Alarm;
  /** What the consumer can emit that a person must act on, each signal once; each has an alarm. */
  readonly attention: readonly AttentionSignal[];
  /** The alarm of each signal in `attention`, by the signal's name. */
  readonly attentionAlarms: Readonly<Record<string, Alarm>>;
  /** Every alarm of the group. */
  readonly alarms: readonly Alarm[];

  constructor(scope: Construct, id: string, props: ConsumerGroupProps) {
    super(scope, id);
    const settings = consumerGroupSettings(props);
    this.groupName = settings.groupName;
    this.ordering = settings.ordering;
    this.delivery = settings.delivery;
    this.tenantConcurrency = settings.tenantConcurrency;
    const queues = createGroupQueues(this, settings, props.deadLetterQueue);
    this.queue = queues.queue;
    this.deadLetterQueue = queues.deadLetterQueue;
    this.bufferQueue = queues.bufferQueue;
    this.bufferDeadLetterQueue = queues.bufferDeadLetterQueue;
    this.deadLetterQueues = deadLetterQueuesOf(queues);
    this.rulePatterns = rulePatternsOf(props.subscriptions, settings);

    if (settings.delivery === "stream") {
      this.rules = []; // Read from the events table's stream by the consumer itself: no hop.
      this.subscribers = [];
    } else if (settings.delivery === "subscriber" && queues.bufferDeadLetterQueue) {
      const delivery = createSubscribers(
        this,
        props.subscriptions,
        settings,
        queues.queue,
        queues.bufferDeadLetterQueue,
      );
      this.rules = [];
      this.subscribers = delivery.subscribers;
      this.subscriberRole = delivery.role;
    } else {
      this.rules = createRules(this, props.subscriptions, settings, queues);
      const hop = createDeliveryHop(this, settings, queues, props.tables.inbox);
      this.dispatcher = hop.dispatcher;
      this.pipe = hop.pipe;
      this.pipeRole = hop.pipeRole;
      this.subscribers = [];
    }

    this.consumer = this.createConsumer(props, settings);
    if (props.model !== undefined) this.callModel(props.model);

    const alarms = createGroupAlarms(
      this,
      settings,
      queues,
      settings.delivery === "stream" ? this.metricIteratorAge() : undefined,
    );
    this.deadLetterAlarm = alarms.deadLetterAlarm;
    this.messageAgeAlarm = alarms.messageAgeAlarm;
    this.bufferDeadLetterAlarm = alarms.bufferDeadLetterAlarm;
    this.bufferMessageAgeAlarm = alarms.bufferMessageAgeAlarm;
    this.attention = settings.attention;
    this.attentionAlarms = alarms.attentionAlarms;
    this.alarms = alarmsOf(alarms);

    // The local runtime and operators find everything of a group by this metadata.
    for (const child of this.node.findAll()) {
      if (child instanceof CfnResource) child.addMetadata(METADATA.group, this.groupName);
    }
  }

  /** Age of the oldest message waiting in the group's queue (Maximum, 1 minute). */
  metricApproximateAgeOfOldestMessage(options?: MetricOptions): Metric {
    return oldestMessageAge(this.queue, options);
  }

  /** Age of the oldest message waiting in the buffer queue (FIFO groups; Maximum, 1 minute). */
  metricBufferApproximateAgeOfOldestMessage(options?: MetricOptions): Metric | undefined {
    return this.bufferQueue && oldestMessageAge(this.bufferQueue, options);
  }

  /**
   * How far behind the events table's stream the consumer is (`delivery: "stream"`;
   * `IteratorAge`, Maximum, 1 minute).
   */
  metricIteratorAge(options?: MetricOptions): Metric {
    return this.consumer.metric("IteratorAge", {
      statistic: "Maximum",
      period: Duration.minutes(1),
      ...options,
    });
  }

  /** Messages waiting in the group's queue (Maximum, 1 minute). */
  metricQueueDepth(options?: MetricOptions): Metric {
    return queueDepth(this.queue, options);
  }

  /** Messages waiting in the buffer queue (FIFO groups; Maximum, 1 minute). */
  metricBufferQueueDepth(options?: MetricOptions): Metric | undefined {
    return this.bufferQueue && queueDepth(this.bufferQueue, options);
  }

  /** Messages in the group's dead-letter queue (Maximum, 1 minute). */
  metricDeadLetterDepth(options?: MetricOptions): Metric {
    return queueDepth(this.deadLetterQueue, options);
  }

  /** Messages in the buffer dead-letter queue (FIFO groups; Maximum, 1 minute). */
  metricBufferDeadLetterDepth(options?: MetricOptions): Metric | undefined {
    return this.bufferDeadLetterQueue && queueDepth(this.bufferDeadLetterQueue, options);
  }

  /**
   * A metric the group's consumer publishes (namespace `AgentBus`, dimensions `service` and
   * `consumer_group`; Sum over 5 minutes).
   */
  metricConsumer(metricName: ConsumerMetric, options?: MetricOptions): Metric {
    return consumerMetric(this.groupName, metricName, options);
  }

  /** Events applied (including those applied to repair a version gap). */
  metricApplied(options?: MetricOptions): Metric {
    return this.metricConsumer("Applied", options);
  }

  /** Deliveries recognized as duplicates (inbox or version gate). */
  metricDuplicates(options?: MetricOptions): Metric {
    return this.metricConsumer("Duplicate", options);
  }

  /** Events discarded unprocessed; with a reason, only those discarded for it. */
  metricDiscarded(reason?: DiscardReason, options?: MetricOptions): Metric {
    if (reason === undefined) return this.metricConsumer("Discarded", options);
    return consumerMetric(this.groupName, "DiscardedByReason", {
      dimensions: { reason },
      label: reason,
      ...options,
    });
  }

  /** Events read from the event store to fill a version gap. */
  metricGapsRepaired(options?: MetricOptions): Metric {
    return this.metricConsumer("GapRepaired", options);
  }

  /** Business rejections (a failure event committed instead of a retry). */
  metricRejected(options?: MetricOptions): Metric {
    return this.metricConsumer("Rejected", options);
  }

  /** Messages the consumer sent straight to the dead-letter queue (permanent failures). */
  metricDeadLettered(options?: MetricOptions): Metric {
    return this.metricConsumer("DeadLettered", options);
  }

  /** Transient failures left for a retry. */
  metricRetried(options?: MetricOptions): Metric {
    return this.metricConsumer("Retried", options);
  }

  /** Deliveries of records to the consumer, every attempt counted. */
  metricReceived(options?: MetricOptions): Metric {
    return this.metricConsumer("Received", options);
  }

  /** Percent of deliveries left for a retry, per 5 minutes (alarmed with the expiry rate: `DeliveryRateAlarm`). */
  metricRetryRate(): MathExpression {
    return retryRate(this.groupName);
  }

  /** Percent of deliveries discarded as expired, per 5 minutes (alarmed with the retry rate: `DeliveryRateAlarm`). */
  metricExpiryRate(): MathExpression {
    return expiryRate(this.groupName);
  }

  /**
   * Milliseconds from an event's `occurred_at` to the start of its processing, per attempt
   * (p99 over 5 minutes).
   */
  metricConsumerLag(options?: MetricOptions): Metric {
    return consumerMetric(this.groupName, TIMING_METRICS.lag, { statistic: "p99", ...options });
  }

  /** Milliseconds from the start of a record's processing to its end (p99 over 5 minutes). */
  metricProcessingTime(options?: MetricOptions): Metric {
    return consumerMetric(this.groupName, TIMING_METRICS.processingTime, {
      statistic: "p99",
      ...options,
    });
  }

  /** Emitted events a person must act on, of one signal (Sum over 5 minutes). */
  metricAttention(signal: AttentionSignal, options?: MetricOptions): Metric {
    return consumerMetric(this.groupName, signal.metric, options);
  }

  /**
   * Let the consumer call a language model: `setting`, else the CDK context's (`agentbus:modelId`
   * on Bedrock, ./model-access.ts), in its environment and, on Bedrock, InvokeModel on that model
   * only. Once per group.
   */
  callModel(setting?: ModelSetting): ModelSetting {
    if (this.modelSetting) return this.modelSetting;
    this.modelSetting = resolveModelSetting(this, setting);
    grantModelAccess(this.consumer, this.modelSetting);
    return this.modelSetting;
  }

  /** Latency of the consumer's model calls, in milliseconds (p99 over 5 minutes). */
  metricModelLatency(options?: MetricOptions): Metric {
    return consumerMetric(this.groupName, MODEL_METRICS.latency, { statistic: "p99", ...options });
  }

  /** Tokens the consumer's model calls read or wrote (Sum over 5 minutes). */
  metricModelTokens(direction: "input" | "output", options?: MetricOptions): Metric {
    const name = direction === "input" ? MODEL_METRICS.inputTokens : MODEL_METRICS.outputTokens;
    return consumerMetric(this.groupName, name, options);
  }

  /**
   * The consumer function: the handler of `props.entry` with the group's tables, queues and
   * retry settings in its environment, reading the group's queue, allowed to send to its DLQ.
   */
  private createConsumer(
    props: ConsumerGroupProps,
    settings: ConsumerGroupSettings,
  ): AgentBusFunction {
    const { groupName } = settings;
    const consumer = new AgentBusFunction(this, "Consumer", {
      kind: "consumer",
      entry: props.entry,
      group: groupName,
      description: `AgentBus ${groupName} consumer`,
      timeout: settings.functionTimeout,
      memorySize: props.memorySize,
      ...(settings.delivery === "stream" ? { unscopedActions: STREAM_UNSCOPED_ACTIONS } : {}),
      environment: {
        GROUP_NAME: groupName,
        STATE_TABLE: props.tables.state.tableName,
        EVENTS_TABLE: props.tables.events.tableName,
        INBOX_TABLE: props.tables.inbox.tableName,
        SIDE_EFFECTS_TABLE: props.tables.sideEffects.tableName,
        QUEUE_URL: this.queue.queueUrl,
        DEAD_LETTER_QUEUE_URL: this.deadLetterQueue.queueUrl,
        INBOX_TTL_DAYS: String(settings.inboxTtlDays),
        RETRY_BASE_SECONDS: String(settings.retryBaseSeconds),
        RETRY_MAX_SECONDS: String(settings.retryMaxSeconds),
        ...(props.legacyCheckpoints ? { LEGACY_CHECKPOINTS: "true" } : {}),
      },
    });
    addConsumerEventSource(consumer, this.queue, settings);
    if (settings.delivery === "stream") {
      const types = props.subscriptions.flatMap((s) => s.eventTypes);
      addStreamEventSource(consumer, props.tables.events, types, settings, this.deadLetterQueue);
      props.tables.grantEventsStream(consumer);
    }
    this.deadLetterQueue.grantSendMessages(consumer);
    props.tables.grantConsumer(consumer);
    return consumer;
  }
}
