import { CfnResource, Duration, Stack } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  type IAlarm,
  Metric,
  type MetricOptions,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import { type CfnRule, Match, Rule, RuleTargetInput } from "aws-cdk-lib/aws-events";
import { SqsQueue } from "aws-cdk-lib/aws-events-targets";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { CfnPipe } from "aws-cdk-lib/aws-pipes";
import { type IQueue, Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import type { DiscardReason } from "../../functions/core/ports";
import { registry } from "../../schemas";
import {
  type Delivery,
  GROUP_NAME_MAX_LENGTH,
  groupSettingsProblems,
  integerProblem,
  kebabCaseProblem,
  MAX_QUEUE_NAME_LENGTH,
  type Ordering,
  type OrderKey,
  stageProblem,
  withGroupDefaults,
} from "./consumer-group-rules";
import { AgentBusFunction, METADATA, METRICS_NAMESPACE } from "./function";
import {
  grantModelAccess,
  MODEL_CONSUMER_ENTRIES,
  type ModelSetting,
  resolveModelSetting,
} from "./model-access";
import type { AgentBusTables } from "./tables";
import type { Topic } from "./topic";

export type { Delivery as ConsumerGroupDelivery, Ordering as ConsumerGroupOrdering, OrderKey };

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
   * `fifo`: in order per order key, through a buffer queue and a FIFO queue. `none`: a standard
   * queue fed by the rules directly, for groups that need no order (audit).
   * @default "fifo"
   */
  readonly ordering?: Ordering;

  /**
   * How events get from the buffer queue into the FIFO queue (FIFO groups only): a dispatch
   * function, or an EventBridge Pipe with a dynamic message group.
   * @default "dispatch-function"
   */
  readonly delivery?: Delivery;

  /**
   * Envelope field that becomes the FIFO message group. Only `order_key` is supported.
   * @default "order_key"
   */
  readonly orderKey?: OrderKey;

  /**
   * Dead-letter queue of the group's queue; must be FIFO for a FIFO group and standard for a
   * standard group. The consumer also sends permanent failures here.
   * @default - a new queue `agentbus-<stage>-<group>-dlq[.fifo]`, kept 14 days
   */
  readonly deadLetterQueue?: IQueue;

  /**
   * Messages per consumer invocation (1..10 on a FIFO queue, 1..10000 on a standard queue).
   * @default 10
   */
  readonly batchSize?: number;

  /**
   * How long the consumer's event source gathers a batch (standard queues only, 0..300 s).
   * @default - none, or 1 second when `batchSize` is over 10 (Lambda requires one then)
   */
  readonly maxBatchingWindow?: Duration;

  /**
   * Most concurrent consumer invocations (event source `MaximumConcurrency`, 2..1000). On a FIFO
   * queue concurrency is also bounded by the number of active message groups.
   * @default 2
   */
  readonly maxConcurrency?: number;

  /**
   * Receives before a message moves to the dead-letter queue (group queue and buffer queue).
   * @default 5
   */
  readonly maxReceiveCount?: number;

  /**
   * Consumer function timeout.
   * @default Duration.seconds(30)
   */
  readonly functionTimeout?: Duration;

  /**
   * Visibility timeout of the group's queue; at least 6x `functionTimeout`.
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
   * Alarm when the oldest message of the group's queue (or of its buffer) is older than this.
   * @default Duration.minutes(5)
   */
  readonly maxMessageAge?: Duration;

  /**
   * EventBridge retries of the rule target before the event goes to the target's DLQ (0..185).
   * @default 185
   */
  readonly ruleRetryAttempts?: number;

  /**
   * Longest time EventBridge keeps retrying the rule target (1 min..24 h).
   * @default Duration.hours(24)
   */
  readonly ruleMaxEventAge?: Duration;

  /**
   * The language model the consumer calls: `MODEL_PROVIDER` / `MODEL_ID` in its environment and,
   * for Bedrock, `bedrock:InvokeModel` on that foundation model only (see `model-access.ts`).
   * @default - for the content agents' handlers (MODEL_CONSUMER_ENTRIES) the CDK context
   * `agentbus:modelId` on Bedrock (else DEFAULT_MODEL_ID); no model for any other handler
   */
  readonly model?: ModelSetting;
}

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

/** Dispatcher settings; the dispatcher only moves messages, so these need no tuning yet. */
const DISPATCH_TIMEOUT = Duration.seconds(30);
const DISPATCH_BATCH_SIZE = 10;
/** Messages the pipe reads from the buffer per batch. */
const PIPE_BATCH_SIZE = 10;
const DLQ_RETENTION = Duration.days(14);
/** SQS cannot keep a message invisible for 12 hours or more. */
const MAX_RETRY_SECONDS = 12 * 60 * 60 - 1;
/** EventBridge Pipe names are at most 64 characters. */
const MAX_PIPE_NAME_LENGTH = 64;

/**
 * A consumer group: every event of its subscribed types, delivered once per group, to one
 * consumer function, with partial batch responses and bounded concurrency.
 *
 * - `ordering: "fifo"` (in order per order key): rule per topic -> buffer queue (+DLQ) ->
 *   dispatch function or EventBridge Pipe -> FIFO queue `<...>.fifo` (+FIFO DLQ) -> consumer.
 * - `ordering: "none"`: rule per topic -> standard queue (+standard DLQ, also the rule target's
 *   DLQ) -> consumer. The rule hands the queue the envelope (`$.detail`) only.
 *
 * Alarms fire on any message in any dead-letter queue and on a backlog older than
 * `maxMessageAge` in the group's queue and its buffer. Every CloudFormation resource of the group
 * carries `agentbus:group` metadata.
 */
export class ConsumerGroup extends Construct {
  readonly groupName: string;
  readonly ordering: Ordering;
  readonly delivery: Delivery;
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
  readonly consumer: AgentBusFunction;
  /** The model the consumer calls, if it calls one. */
  readonly model?: ModelSetting;
  readonly deadLetterAlarm: IAlarm;
  readonly bufferDeadLetterAlarm?: IAlarm;
  readonly messageAgeAlarm: IAlarm;
  readonly bufferMessageAgeAlarm?: IAlarm;
  /** Every alarm of the group. */
  readonly alarms: readonly IAlarm[];

  constructor(scope: Construct, id: string, props: ConsumerGroupProps) {
    super(scope, id);
    const settings = validate(props);
    const { groupName, stage, ordering, delivery } = settings;
    this.groupName = groupName;
    this.ordering = ordering;
    this.delivery = delivery;
    const prefix = `agentbus-${stage}-${groupName}`;
    const fifo = ordering === "fifo";
    const names = queueNames(prefix, ordering);

    // The group's queue. Names are explicit (moto needs the `.fifo` name in the template).
    // Content-based dedup stays off on purpose: every sender sets MessageDeduplicationId = event id.
    this.deadLetterQueue =
      props.deadLetterQueue ??
      new Queue(this, "DeadLetterQueue", {
        queueName: names.deadLetterQueue,
        ...(fifo ? { fifo: true, contentBasedDeduplication: false } : {}),
        encryption: QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        retentionPeriod: DLQ_RETENTION,
      });
    this.queue = new Queue(this, "Resource", {
      queueName: names.queue,
      ...(fifo ? { fifo: true, contentBasedDeduplication: false } : {}),
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: settings.visibilityTimeout,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: settings.maxReceiveCount },
    });

    let ruleTarget: SqsQueue;
    if (fifo) {
      // Buffer: where the rules deliver; standard, so EventBridge needs no static message group.
      this.bufferDeadLetterQueue = new Queue(this, "BufferDeadLetterQueue", {
        queueName: names.bufferDeadLetterQueue,
        encryption: QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        retentionPeriod: DLQ_RETENTION,
      });
      this.bufferQueue = new Queue(this, "BufferQueue", {
        queueName: names.bufferQueue,
        encryption: QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        visibilityTimeout: Duration.seconds(DISPATCH_TIMEOUT.toSeconds() * 6),
        deadLetterQueue: {
          queue: this.bufferDeadLetterQueue,
          maxReceiveCount: settings.maxReceiveCount,
        },
      });
      ruleTarget = new SqsQueue(this.bufferQueue, {
        deadLetterQueue: this.bufferDeadLetterQueue,
        retryAttempts: settings.ruleRetryAttempts,
        maxEventAge: settings.ruleMaxEventAge,
      });
    } else {
      ruleTarget = new SqsQueue(this.queue, {
        message: RuleTargetInput.fromEventPath("$.detail"),
        deadLetterQueue: this.deadLetterQueue,
        retryAttempts: settings.ruleRetryAttempts,
        maxEventAge: settings.ruleMaxEventAge,
      });
    }
    this.deadLetterQueues = [
      this.deadLetterQueue,
      ...(this.bufferDeadLetterQueue ? [this.bufferDeadLetterQueue] : []),
    ];

    this.rules = props.subscriptions.map((subscription) => {
      const rule = new Rule(this, `${pascal(subscription.topic.topicName)}Rule`, {
        eventBus: subscription.topic.bus,
        description: `${groupName}: ${subscription.eventTypes.join(", ")}`.slice(0, 512),
        eventPattern: {
          source: Match.prefix("agentbus"),
          detailType: [...new Set(subscription.eventTypes)],
        },
        targets: [ruleTarget],
      });
      // `Fn::GetAtt Name` instead of `Ref`: same value on AWS, and moto resolves it.
      (rule.node.defaultChild as CfnRule).eventBusName = subscription.topic.busName;
      return rule;
    });

    if (this.bufferQueue && this.bufferDeadLetterQueue) {
      if (delivery === "pipe") {
        const pipe = this.createPipe(prefix, this.bufferQueue, settings.orderKey);
        this.pipe = pipe.pipe;
        this.pipeRole = pipe.role;
      } else {
        this.dispatcher = this.createDispatcher(
          groupName,
          this.bufferQueue,
          this.bufferDeadLetterQueue,
        );
      }
    }

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
        maxBatchingWindow: settings.maxBatchingWindow,
        reportBatchItemFailures: true,
        maxConcurrency: settings.maxConcurrency,
      }),
    );
    this.deadLetterQueue.grantSendMessages(this.consumer);
    props.tables.grantConsumer(this.consumer);
    if (props.model !== undefined || MODEL_CONSUMER_ENTRIES.has(props.entry)) {
      this.model = resolveModelSetting(this, props.model);
      grantModelAccess(this.consumer, this.model);
    }

    const ageDescription = `oldest message waiting longer than ${settings.maxMessageAge.toHumanString()}`;
    this.deadLetterAlarm = deadLetterAlarm(
      this,
      "DeadLetterAlarm",
      this.metricDeadLetterDepth(),
      `${groupName}: messages in the ${fifo ? "FIFO " : ""}dead-letter queue`,
    );
    this.messageAgeAlarm = ageAlarm(
      this,
      "MessageAgeAlarm",
      this.metricApproximateAgeOfOldestMessage(),
      settings.maxMessageAge,
      `${groupName}: ${ageDescription}`,
    );
    if (this.bufferQueue && this.bufferDeadLetterQueue) {
      this.bufferDeadLetterAlarm = deadLetterAlarm(
        this,
        "BufferDeadLetterAlarm",
        depth(this.bufferDeadLetterQueue),
        `${groupName}: events in the buffer dead-letter queue (undeliverable or invalid)`,
      );
      this.bufferMessageAgeAlarm = ageAlarm(
        this,
        "BufferMessageAgeAlarm",
        oldestAge(this.bufferQueue),
        settings.maxMessageAge,
        `${groupName}: buffer ${ageDescription} (${delivery} not keeping up)`,
      );
    }
    this.alarms = [
      this.deadLetterAlarm,
      this.messageAgeAlarm,
      ...(this.bufferDeadLetterAlarm ? [this.bufferDeadLetterAlarm] : []),
      ...(this.bufferMessageAgeAlarm ? [this.bufferMessageAgeAlarm] : []),
    ];

    // The local runtime and operators find everything of a group by this metadata.
    for (const child of this.node.findAll()) {
      if (child instanceof CfnResource) child.addMetadata(METADATA.group, groupName);
    }
  }

  /** Age of the oldest message waiting in the group's queue (Maximum, 1 minute). */
  metricApproximateAgeOfOldestMessage(options?: MetricOptions): Metric {
    return oldestAge(this.queue, options);
  }

  /** Age of the oldest message waiting in the buffer queue (FIFO groups; Maximum, 1 minute). */
  metricBufferApproximateAgeOfOldestMessage(options?: MetricOptions): Metric | undefined {
    return this.bufferQueue && oldestAge(this.bufferQueue, options);
  }

  /** Messages in the group's dead-letter queue (Maximum, 1 minute). */
  metricDeadLetterDepth(options?: MetricOptions): Metric {
    return depth(this.deadLetterQueue, options);
  }

  /** Messages in the buffer dead-letter queue (FIFO groups; Maximum, 1 minute). */
  metricBufferDeadLetterDepth(options?: MetricOptions): Metric | undefined {
    return this.bufferDeadLetterQueue && depth(this.bufferDeadLetterQueue, options);
  }

  /**
   * A metric the group's consumer publishes (namespace `AgentBus`, dimensions `service` and
   * `consumer_group`; Sum over 5 minutes).
   */
  metricConsumer(metricName: ConsumerMetric, options?: MetricOptions): Metric {
    return new Metric({
      namespace: METRICS_NAMESPACE,
      metricName,
      dimensionsMap: { service: this.groupName, consumer_group: this.groupName },
      statistic: "Sum",
      period: Duration.minutes(5),
      ...options,
    });
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
    return new Metric({
      namespace: METRICS_NAMESPACE,
      metricName: "DiscardedByReason",
      dimensionsMap: { service: this.groupName, consumer_group: this.groupName, reason },
      statistic: "Sum",
      period: Duration.minutes(5),
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

  private createDispatcher(groupName: string, buffer: Queue, bufferDlq: Queue): AgentBusFunction {
    const dispatcher = new AgentBusFunction(this, "Dispatcher", {
      kind: "dispatch",
      entry: "functions/handlers/dispatch.ts",
      group: groupName,
      serviceName: `${groupName}-dispatch`,
      description: `AgentBus ${groupName}: buffer queue -> FIFO queue`,
      timeout: DISPATCH_TIMEOUT,
      environment: {
        TARGET_QUEUE_URL: this.queue.queueUrl,
        DEAD_LETTER_QUEUE_URL: bufferDlq.queueUrl,
        SOURCE_QUEUE_URL: buffer.queueUrl,
        GROUP_NAME: groupName,
      },
    });
    dispatcher.addEventSource(
      new SqsEventSource(buffer, { batchSize: DISPATCH_BATCH_SIZE, reportBatchItemFailures: true }),
    );
    this.queue.grantSendMessages(dispatcher);
    bufferDlq.grantSendMessages(dispatcher);
    return dispatcher;
  }

  /**
   * buffer -> Pipe -> FIFO queue, with the message group and dedup id taken from the envelope
   * (`$.body` is the buffer message parsed as JSON: the EventBridge event) and only the envelope
   * forwarded as the message body. A message the pipe cannot deliver returns to the buffer and
   * ends in the buffer DLQ after `maxReceiveCount` receives.
   */
  private createPipe(
    name: string,
    buffer: Queue,
    orderKey: OrderKey,
  ): { pipe: CfnPipe; role: Role } {
    const stack = Stack.of(this);
    const pipeArn = stack.formatArn({ service: "pipes", resource: "pipe", resourceName: name });
    const role = new Role(this, "PipeRole", {
      description: `EventBridge Pipe ${name}: buffer queue -> FIFO queue`,
      assumedBy: new ServicePrincipal("pipes.amazonaws.com", {
        conditions: {
          StringEquals: { "aws:SourceAccount": stack.account, "aws:SourceArn": pipeArn },
        },
      }),
    });
    buffer.grant(role, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes");
    this.queue.grant(role, "sqs:SendMessage");
    const pipe = new CfnPipe(this, "Pipe", {
      name,
      description: `AgentBus ${this.groupName}: buffer queue -> FIFO queue, grouped by ${orderKey}`,
      desiredState: "RUNNING",
      roleArn: role.roleArn,
      source: buffer.queueArn,
      sourceParameters: { sqsQueueParameters: { batchSize: PIPE_BATCH_SIZE } },
      target: this.queue.queueArn,
      targetParameters: {
        inputTemplate: "<$.body.detail>",
        sqsQueueParameters: {
          messageGroupId: `$.body.detail.${orderKey}`,
          messageDeduplicationId: "$.body.detail.event_id",
        },
      },
    });
    // The pipe checks its permissions when it is created: the role's policy must exist by then.
    pipe.node.addDependency(role);
    return { pipe, role };
  }
}

interface Settings {
  readonly groupName: string;
  readonly stage: string;
  readonly ordering: Ordering;
  readonly delivery: Delivery;
  readonly orderKey: OrderKey;
  readonly batchSize: number;
  readonly maxBatchingWindow: Duration | undefined;
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

/** Defaults applied and every prop checked before any resource exists; all problems at once. */
function validate(props: ConsumerGroupProps): Settings {
  const groupName = props.groupName;
  const nameProblem = kebabCaseProblem("consumer group name", groupName, GROUP_NAME_MAX_LENGTH);
  if (nameProblem) throw new Error(nameProblem);
  const stage = props.stage ?? "dev";
  const prefix = `agentbus-${stage}-${groupName}`;

  const group = withGroupDefaults({
    ordering: props.ordering,
    delivery: props.delivery,
    orderKey: props.orderKey,
    batchSize: props.batchSize,
    maxConcurrency: props.maxConcurrency,
    maxReceiveCount: props.maxReceiveCount,
    functionTimeout: props.functionTimeout,
    visibilityTimeout: props.visibilityTimeout,
  });
  const problems: (string | undefined)[] = [
    stageProblem(stage),
    ...groupSettingsProblems(group),
    ...subscriptionProblems(props.subscriptions),
  ];

  if (props.deadLetterQueue && props.deadLetterQueue.fifo !== (group.ordering === "fifo")) {
    problems.push(
      group.ordering === "fifo"
        ? `deadLetterQueue ${props.deadLetterQueue.node.path} is a standard queue: the dead-letter queue of a FIFO queue must be FIFO`
        : `deadLetterQueue ${props.deadLetterQueue.node.path} is a FIFO queue: the dead-letter queue of a standard queue must be standard`,
    );
  }
  for (const queueName of Object.values(queueNames(prefix, group.ordering))) {
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

  let maxBatchingWindow = props.maxBatchingWindow;
  if (maxBatchingWindow !== undefined && group.ordering === "fifo") {
    problems.push(
      `maxBatchingWindow ${maxBatchingWindow.toHumanString()} is not supported on a FIFO queue`,
    );
  } else if (maxBatchingWindow !== undefined) {
    const seconds = maxBatchingWindow.toSeconds();
    problems.push(integerProblem("maxBatchingWindow (seconds)", seconds, 0, 300));
    if (group.batchSize > 10 && seconds < 1) {
      problems.push(
        `maxBatchingWindow ${seconds}s must be at least 1s with batchSize ${group.batchSize} (over 10)`,
      );
    }
  } else if (group.ordering === "none" && group.batchSize > 10) {
    maxBatchingWindow = Duration.seconds(1);
  }

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

  const inboxTtl = props.inboxTtl ?? Duration.days(7);
  const inboxTtlDays = inboxTtl.toHours() / 24;
  if (!Number.isInteger(inboxTtlDays) || inboxTtlDays < 1) {
    problems.push(
      `inboxTtl ${inboxTtl.toHumanString()} must be a whole number of days, at least 1`,
    );
  }

  const maxMessageAge = props.maxMessageAge ?? Duration.minutes(5);
  problems.push(integerProblem("maxMessageAge (seconds)", maxMessageAge.toSeconds(), 1, 1_209_600));
  const ruleRetryAttempts = props.ruleRetryAttempts ?? 185;
  problems.push(integerProblem("ruleRetryAttempts", ruleRetryAttempts, 0, 185));
  const ruleMaxEventAge = props.ruleMaxEventAge ?? Duration.hours(24);
  problems.push(
    integerProblem("ruleMaxEventAge (seconds)", ruleMaxEventAge.toSeconds(), 60, 86_400),
  );

  const found = problems.filter((p): p is string => p !== undefined);
  if (found.length > 0) {
    throw new Error(`consumer group ${groupName}: ${found.join("; ")}`);
  }
  return {
    groupName,
    stage,
    ...group,
    maxBatchingWindow,
    retryBaseSeconds,
    retryMaxSeconds,
    inboxTtlDays,
    maxMessageAge,
    ruleRetryAttempts,
    ruleMaxEventAge,
  };
}

/** The physical names of a group's queues (buffer queues only for FIFO groups). */
function queueNames(prefix: string, ordering: Ordering) {
  const fifo = ordering === "fifo";
  return {
    queue: fifo ? `${prefix}.fifo` : prefix,
    deadLetterQueue: fifo ? `${prefix}-dlq.fifo` : `${prefix}-dlq`,
    bufferQueue: fifo ? `${prefix}-buffer` : undefined,
    bufferDeadLetterQueue: fifo ? `${prefix}-buffer-dlq` : undefined,
  };
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

function depth(queue: IQueue, options?: MetricOptions): Metric {
  return queue.metricApproximateNumberOfMessagesVisible({
    statistic: "Maximum",
    period: Duration.minutes(1),
    ...options,
  });
}

function oldestAge(queue: IQueue, options?: MetricOptions): Metric {
  return queue.metricApproximateAgeOfOldestMessage({
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

function pascal(kebab: string): string {
  return kebab
    .split("-")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}
