import { Duration } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  type IAlarm,
  type Metric,
  type MetricOptions,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import { type CfnRule, Match, Rule } from "aws-cdk-lib/aws-events";
import { SqsQueue } from "aws-cdk-lib/aws-events-targets";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { type IQueue, Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { registry } from "../../schemas";
import { AgentBusFunction, assertKebabCase } from "./function";
import type { AgentBusTables } from "./tables";
import type { Topic } from "./topic";

/**
 * How events get from the group's rule into its FIFO queue.
 * - `dispatch-function`: rule -> standard buffer queue -> dispatch Lambda -> FIFO queue, with the
 *   message group taken from each envelope's order key. Runs on LocalStack's free image and on the
 *   local runtime.
 * (A later change adds `pipe`: an EventBridge Pipe from the buffer queue to the FIFO queue.)
 */
export type ConsumerGroupDelivery = "dispatch-function";
const DELIVERIES: readonly string[] = ["dispatch-function"] satisfies ConsumerGroupDelivery[];

/** The event types a group receives from one topic; one rule per topic. */
export interface ConsumerGroupSubscription {
  readonly topic: Topic;
  /** Registered event types of that topic (`detail-type` of the rule's pattern). */
  readonly eventTypes: readonly string[];
}

export interface ConsumerGroupProps {
  /** Name of the group: kebab-case, at most 40 characters; part of its queue names. */
  readonly groupName: string;

  /**
   * Deployment stage; part of the queue names.
   * @default "dev"
   */
  readonly stage?: string;

  /** What the group receives, per topic. Every type must be registered on that topic. */
  readonly subscriptions: readonly ConsumerGroupSubscription[];

  /**
   * Consumer handler file relative to the repository root, e.g.
   * `functions/handlers/task-projection.ts`.
   */
  readonly entry: string;

  /** The tables the consumer reads and writes. */
  readonly tables: AgentBusTables;

  /**
   * How events reach the group's FIFO queue.
   * @default "dispatch-function"
   */
  readonly delivery?: ConsumerGroupDelivery;

  /**
   * Messages per consumer invocation (1..10 on a FIFO queue).
   * @default 10
   */
  readonly batchSize?: number;

  /**
   * Most concurrent consumer invocations (event source `MaximumConcurrency`, 2..1000). On a FIFO
   * queue concurrency is also bounded by the number of active message groups.
   * @default 2
   */
  readonly maxConcurrency?: number;

  /**
   * Receives before a message moves to the dead-letter queue (FIFO queue and buffer queue).
   * @default 5
   */
  readonly maxReceiveCount?: number;

  /**
   * Consumer function timeout.
   * @default Duration.seconds(30)
   */
  readonly functionTimeout?: Duration;

  /**
   * Visibility timeout of the FIFO queue; at least 6x `functionTimeout`.
   * @default - 6x `functionTimeout`
   */
  readonly visibilityTimeout?: Duration;

  /**
   * Consumer function memory in MB.
   * @default 256
   */
  readonly memorySize?: number;

  /**
   * First retry delay of a transient failure (the consumer backs off via message visibility).
   * @default 2
   */
  readonly retryBaseSeconds?: number;

  /**
   * Longest retry delay; at most 43199 (12 h - 1 s, the limit of a message's visibility).
   * @default 300
   */
  readonly retryMaxSeconds?: number;

  /**
   * How long inbox (dedup) records are kept; whole days, at least one.
   * @default Duration.days(7)
   */
  readonly inboxTtl?: Duration;

  /**
   * Alarm when the oldest message of the FIFO queue is older than this.
   * @default Duration.minutes(5)
   */
  readonly maxMessageAge?: Duration;

  /**
   * EventBridge retries of the rule target before the event goes to the buffer DLQ (0..185).
   * @default 185
   */
  readonly ruleRetryAttempts?: number;

  /**
   * Longest time EventBridge keeps retrying the rule target (1 min..24 h).
   * @default Duration.hours(24)
   */
  readonly ruleMaxEventAge?: Duration;
}

/** Dispatcher settings; the dispatcher only moves messages, so these need no tuning yet. */
const DISPATCH_TIMEOUT = Duration.seconds(30);
const DISPATCH_BATCH_SIZE = 10;
const DLQ_RETENTION = Duration.days(14);
/** SQS cannot keep a message invisible for 12 hours or more. */
const MAX_VISIBILITY_SECONDS = 12 * 60 * 60 - 1;

/**
 * A consumer group: every event of its subscribed types, delivered once per group, in order per
 * order key, to one consumer function.
 *
 * rule per topic -> buffer queue (+DLQ) -> dispatcher -> FIFO queue `<...>.fifo` (+FIFO DLQ) ->
 * consumer (partial batch responses, bounded concurrency). Alarms fire on any dead letter and on
 * a FIFO backlog older than `maxMessageAge`.
 */
export class ConsumerGroup extends Construct {
  readonly groupName: string;
  /** The group's FIFO queue, keyed by order key and de-duplicated by event id. */
  readonly queue: Queue;
  /** FIFO dead-letter queue of `queue`; the consumer also sends permanent failures here. */
  readonly deadLetterQueue: Queue;
  /** Standard queue the rules deliver to. */
  readonly bufferQueue: Queue;
  /** Dead letters of the rules' targets, of the buffer queue, and invalid envelopes. */
  readonly bufferDeadLetterQueue: Queue;
  readonly rules: readonly Rule[];
  readonly dispatcher: AgentBusFunction;
  readonly consumer: AgentBusFunction;
  readonly deadLetterAlarm: IAlarm;
  readonly bufferDeadLetterAlarm: IAlarm;
  readonly messageAgeAlarm: IAlarm;

  constructor(scope: Construct, id: string, props: ConsumerGroupProps) {
    super(scope, id);
    const settings = validate(props);
    const { groupName, stage } = settings;
    this.groupName = groupName;
    const prefix = `agentbus-${stage}-${groupName}`;

    // Buffer: where the rules deliver; standard, so EventBridge needs no static message group.
    this.bufferDeadLetterQueue = new Queue(this, "BufferDeadLetterQueue", {
      queueName: `${prefix}-buffer-dlq`,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: DLQ_RETENTION,
    });
    this.bufferQueue = new Queue(this, "BufferQueue", {
      queueName: `${prefix}-buffer`,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: Duration.seconds(DISPATCH_TIMEOUT.toSeconds() * 6),
      deadLetterQueue: {
        queue: this.bufferDeadLetterQueue,
        maxReceiveCount: settings.maxReceiveCount,
      },
    });

    // The group's FIFO queue. Names are explicit (moto needs the `.fifo` name in the template).
    // Content-based dedup stays off on purpose: every sender sets MessageDeduplicationId = event id.
    this.deadLetterQueue = new Queue(this, "DeadLetterQueue", {
      queueName: `${prefix}-dlq.fifo`,
      fifo: true,
      contentBasedDeduplication: false,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: DLQ_RETENTION,
    });
    this.queue = new Queue(this, "Resource", {
      queueName: `${prefix}.fifo`,
      fifo: true,
      contentBasedDeduplication: false,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: settings.visibilityTimeout,
      deadLetterQueue: fifoDeadLetterQueue(this.deadLetterQueue, settings.maxReceiveCount),
    });

    this.rules = props.subscriptions.map((subscription) => {
      const rule = new Rule(this, `${pascal(subscription.topic.topicName)}Rule`, {
        eventBus: subscription.topic.bus,
        description: `${groupName}: ${subscription.eventTypes.join(", ")}`.slice(0, 512),
        eventPattern: {
          source: Match.prefix("agentbus"),
          detailType: [...new Set(subscription.eventTypes)],
        },
        targets: [
          new SqsQueue(this.bufferQueue, {
            deadLetterQueue: this.bufferDeadLetterQueue,
            retryAttempts: settings.ruleRetryAttempts,
            maxEventAge: settings.ruleMaxEventAge,
          }),
        ],
      });
      // `Fn::GetAtt Name` instead of `Ref`: same value on AWS, and moto resolves it.
      (rule.node.defaultChild as CfnRule).eventBusName = subscription.topic.busName;
      return rule;
    });

    this.dispatcher = new AgentBusFunction(this, "Dispatcher", {
      kind: "dispatch",
      entry: "functions/handlers/dispatch.ts",
      group: groupName,
      serviceName: `${groupName}-dispatch`,
      description: `AgentBus ${groupName}: buffer queue -> FIFO queue`,
      timeout: DISPATCH_TIMEOUT,
      environment: {
        TARGET_QUEUE_URL: this.queue.queueUrl,
        DEAD_LETTER_QUEUE_URL: this.bufferDeadLetterQueue.queueUrl,
        GROUP_NAME: groupName,
      },
    });
    this.dispatcher.addEventSource(
      new SqsEventSource(this.bufferQueue, {
        batchSize: DISPATCH_BATCH_SIZE,
        reportBatchItemFailures: true,
      }),
    );
    this.queue.grantSendMessages(this.dispatcher);
    this.bufferDeadLetterQueue.grantSendMessages(this.dispatcher);

    this.consumer = new AgentBusFunction(this, "Consumer", {
      kind: "consumer",
      entry: props.entry,
      group: groupName,
      description: `AgentBus ${groupName} consumer`,
      timeout: settings.functionTimeout,
      memorySize: props.memorySize,
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
      },
    });
    // Consume grants include sqs:ChangeMessageVisibility, which the consumer's backoff uses.
    this.consumer.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: settings.batchSize,
        reportBatchItemFailures: true,
        maxConcurrency: settings.maxConcurrency,
      }),
    );
    this.deadLetterQueue.grantSendMessages(this.consumer);
    props.tables.grantConsumer(this.consumer);

    this.deadLetterAlarm = deadLetterAlarm(
      this,
      "DeadLetterAlarm",
      this.metricDeadLetterDepth(),
      `${groupName}: messages in the FIFO dead-letter queue`,
    );
    this.bufferDeadLetterAlarm = deadLetterAlarm(
      this,
      "BufferDeadLetterAlarm",
      this.metricBufferDeadLetterDepth(),
      `${groupName}: events in the buffer dead-letter queue (undeliverable or invalid)`,
    );
    this.messageAgeAlarm = new Alarm(this, "MessageAgeAlarm", {
      metric: this.metricApproximateAgeOfOldestMessage(),
      threshold: settings.maxMessageAge.toSeconds(),
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `${groupName}: oldest message waiting longer than ${settings.maxMessageAge.toHumanString()}`,
    });
  }

  /** Age of the oldest message waiting in the group's FIFO queue (Maximum, 1 minute). */
  metricApproximateAgeOfOldestMessage(options?: MetricOptions): Metric {
    return this.queue.metricApproximateAgeOfOldestMessage({
      statistic: "Maximum",
      period: Duration.minutes(1),
      ...options,
    });
  }

  /** Messages in the FIFO dead-letter queue (Maximum, 1 minute). */
  metricDeadLetterDepth(options?: MetricOptions): Metric {
    return depth(this.deadLetterQueue, options);
  }

  /** Messages in the buffer dead-letter queue (Maximum, 1 minute). */
  metricBufferDeadLetterDepth(options?: MetricOptions): Metric {
    return depth(this.bufferDeadLetterQueue, options);
  }
}

interface Settings {
  readonly groupName: string;
  readonly stage: string;
  readonly batchSize: number;
  readonly maxConcurrency: number;
  readonly maxReceiveCount: number;
  readonly functionTimeout: Duration;
  readonly visibilityTimeout: Duration;
  readonly retryBaseSeconds: number;
  readonly retryMaxSeconds: number;
  readonly inboxTtlDays: number;
  readonly maxMessageAge: Duration;
  readonly ruleRetryAttempts: number;
  readonly ruleMaxEventAge: Duration;
}

/** Defaults applied and every prop checked before any resource exists. */
function validate(props: ConsumerGroupProps): Settings {
  const groupName = props.groupName;
  assertKebabCase("consumer group name", groupName, 40);
  const what = `consumer group ${groupName}`;
  const stage = props.stage ?? "dev";
  assertKebabCase(`${what}: stage`, stage, 16);

  const delivery = props.delivery ?? "dispatch-function";
  if (!DELIVERIES.includes(delivery)) {
    throw new Error(
      `${what}: delivery ${JSON.stringify(delivery)} is not supported (supported: ${DELIVERIES.join(", ")})`,
    );
  }

  validateSubscriptions(what, props.subscriptions);

  const batchSize = props.batchSize ?? 10;
  assertIntegerIn(`${what}: batchSize`, batchSize, 1, 10, " (FIFO queues deliver at most 10)");
  const maxConcurrency = props.maxConcurrency ?? 2;
  assertIntegerIn(`${what}: maxConcurrency`, maxConcurrency, 2, 1000);
  const maxReceiveCount = props.maxReceiveCount ?? 5;
  assertIntegerIn(`${what}: maxReceiveCount`, maxReceiveCount, 1, 1000);

  const functionTimeout = props.functionTimeout ?? Duration.seconds(30);
  const timeoutSeconds = functionTimeout.toSeconds();
  assertIntegerIn(`${what}: functionTimeout (seconds)`, timeoutSeconds, 1, 900);
  const visibilityTimeout = props.visibilityTimeout ?? Duration.seconds(timeoutSeconds * 6);
  const visibilitySeconds = visibilityTimeout.toSeconds();
  if (visibilitySeconds < timeoutSeconds * 6) {
    throw new Error(
      `${what}: visibilityTimeout ${visibilitySeconds}s is under 6x functionTimeout ${timeoutSeconds}s (at least ${timeoutSeconds * 6}s)`,
    );
  }
  assertIntegerIn(`${what}: visibilityTimeout (seconds)`, visibilitySeconds, 0, 43_200);

  const retryBaseSeconds = props.retryBaseSeconds ?? 2;
  assertIntegerIn(`${what}: retryBaseSeconds`, retryBaseSeconds, 1, MAX_VISIBILITY_SECONDS);
  const retryMaxSeconds = props.retryMaxSeconds ?? Math.max(300, retryBaseSeconds);
  assertIntegerIn(
    `${what}: retryMaxSeconds`,
    retryMaxSeconds,
    retryBaseSeconds,
    MAX_VISIBILITY_SECONDS,
    ` (from retryBaseSeconds ${retryBaseSeconds} to 12 h - 1 s)`,
  );

  const inboxTtl = props.inboxTtl ?? Duration.days(7);
  const inboxTtlDays = inboxTtl.toHours() / 24;
  if (!Number.isInteger(inboxTtlDays) || inboxTtlDays < 1) {
    throw new Error(
      `${what}: inboxTtl ${inboxTtl.toHumanString()} must be a whole number of days, at least 1`,
    );
  }

  const maxMessageAge = props.maxMessageAge ?? Duration.minutes(5);
  assertIntegerIn(`${what}: maxMessageAge (seconds)`, maxMessageAge.toSeconds(), 1, 1_209_600);
  const ruleRetryAttempts = props.ruleRetryAttempts ?? 185;
  assertIntegerIn(`${what}: ruleRetryAttempts`, ruleRetryAttempts, 0, 185);
  const ruleMaxEventAge = props.ruleMaxEventAge ?? Duration.hours(24);
  assertIntegerIn(`${what}: ruleMaxEventAge (seconds)`, ruleMaxEventAge.toSeconds(), 60, 86_400);

  return {
    groupName,
    stage,
    batchSize,
    maxConcurrency,
    maxReceiveCount,
    functionTimeout,
    visibilityTimeout,
    retryBaseSeconds,
    retryMaxSeconds,
    inboxTtlDays,
    maxMessageAge,
    ruleRetryAttempts,
    ruleMaxEventAge,
  };
}

/** Each subscribed type must be registered, on the topic it is subscribed from. */
function validateSubscriptions(
  what: string,
  subscriptions: readonly ConsumerGroupSubscription[],
): void {
  if (subscriptions.length === 0) throw new Error(`${what}: subscriptions must not be empty`);
  const definitions = registry.definitions();
  const topics = new Set<string>();
  const seen = new Set<string>();
  for (const { topic, eventTypes } of subscriptions) {
    if (topics.has(topic.topicName)) {
      throw new Error(
        `${what}: topic ${JSON.stringify(topic.topicName)} appears in two subscriptions (merge them: one rule per topic)`,
      );
    }
    topics.add(topic.topicName);
    if (eventTypes.length === 0) {
      throw new Error(
        `${what}: subscription to topic ${JSON.stringify(topic.topicName)} lists no event types`,
      );
    }
    for (const type of eventTypes) {
      const onTopics = [...new Set(definitions.filter((d) => d.type === type).map((d) => d.topic))];
      if (onTopics.length === 0) {
        throw new Error(`${what}: event type ${JSON.stringify(type)} is not in the registry`);
      }
      if (!onTopics.includes(topic.topicName)) {
        throw new Error(
          `${what}: event type ${JSON.stringify(type)} is published on topic ${onTopics.map((t) => JSON.stringify(t)).join(", ")}, not ${JSON.stringify(topic.topicName)}`,
        );
      }
      if (seen.has(type)) {
        throw new Error(`${what}: event type ${JSON.stringify(type)} is subscribed twice`);
      }
      seen.add(type);
    }
  }
}

/** A FIFO queue's redrive target must itself be FIFO. */
function fifoDeadLetterQueue(queue: IQueue, maxReceiveCount: number) {
  if (!queue.fifo) {
    throw new Error(`the dead-letter queue of a FIFO queue must be FIFO (got ${queue.node.path})`);
  }
  return { queue, maxReceiveCount };
}

function assertIntegerIn(what: string, value: number, min: number, max: number, hint = ""): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${what} is ${value}, must be an integer from ${min} to ${max}${hint}`);
  }
}

function depth(queue: IQueue, options?: MetricOptions): Metric {
  return queue.metricApproximateNumberOfMessagesVisible({
    statistic: "Maximum",
    period: Duration.minutes(1),
    ...options,
  });
}

function deadLetterAlarm(scope: Construct, id: string, metric: Metric, description: string) {
  return new Alarm(scope, id, {
    metric,
    threshold: 0,
    comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: TreatMissingData.NOT_BREACHING,
    alarmDescription: description,
  });
}

function pascal(kebab: string): string {
  return kebab
    .split("-")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}
