import { Duration, Token, Validations } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  Metric,
  type MetricOptions,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import { FilterCriteria, FilterRule, StartingPosition } from "aws-cdk-lib/aws-lambda";
import { DynamoEventSource, SqsDlq } from "aws-cdk-lib/aws-lambda-event-sources";
import { type CfnQueue, type IQueue, Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { DIRECT_GROUPS_ENV, type DirectGroup } from "../../../functions/core/direct-delivery";
import { packJson } from "../../../functions/core/packed-json";
import { HUB_HANDLERS } from "../hub-handlers";
import { retentionAt } from "../retention";
import { ALARM_ACTIONS } from "./alarm-commands";
import { AgentBusFunction, METRICS_NAMESPACE } from "./function";
import type { AgentBusTables } from "./tables";
import type { Topic } from "./topic";

/**
 * The `service` dimension of the relay's metrics: functions/handlers/relay.ts names its
 * Powertools metrics service `relay` explicitly, which wins over `POWERTOOLS_SERVICE_NAME`.
 */
export const RELAY_METRICS_SERVICE = "relay";

/** Metrics the relay publishes per batch (namespace `AgentBus`, dimension `service`). */
export const RELAY_METRICS = ["Relayed", "PutEventsCalls", "RelayRetriedEntries"] as const;
export type RelayMetric = (typeof RELAY_METRICS)[number];

export interface RelayProps {
  /** The topics the relay publishes to; each bus name reaches the handler as `BUS_<TOPIC>`. */
  readonly topics: readonly Topic[];

  /** The tables whose events table stream the relay reads. */
  readonly tables: AgentBusTables;

  /**
   * Stream records per invocation: at most this many, all published one PutEvents call of up to
   * 10 entries after the other. A shard's next batch holds whatever was written while the
   * previous one was being published, so under load calls are full (10 entries) without any
   * batching window; 100 keeps a batch's publishing (10 calls) well inside the timeout, and a
   * failing batch small to bisect.
   * @default 100
   */
  readonly batchSize?: number;

  /**
   * Concurrent batches per stream shard (1 to 10). DynamoDB Streams keeps order per item (its
   * partition and sort key), and every event is an item of its own (aggregate id, version): with
   * more than 1, version N+1 of an aggregate may be published before version N, and every
   * consumer group then pays a gap repair (a Query of the events table) for it. So the relay
   * scales with the stream's shards, one per table partition, not within one: a partition takes
   * at most 1,000 write units a second, i.e. 500 transactional writes of events up to 1 KB, which
   * one batch at a time publishes at 10 entries per PutEvents call of ~20-30 ms. Raise it only
   * for a hot partition whose relay falls behind (the iterator age alarm), accepting the repairs.
   * @default 1
   */
  readonly parallelizationFactor?: number;

  /**
   * How long the stream may gather records before invoking the relay (0 to 300 seconds, whole
   * seconds). None by default: EventBridge bills per entry, not per call, so waiting would only
   * save relay invocations at low load, and it would add its whole length to every event's
   * latency when traffic is light; under load batches fill by themselves (see `batchSize`).
   * @default - none (invoke as soon as records are there)
   */
  readonly maxBatchingWindow?: Duration;

  /**
   * Retries of a failing batch (halved on each failure) before its position goes to the failure
   * queue.
   * @default 10
   */
  readonly retryAttempts?: number;

  /**
   * Oldest record the relay still tries to publish.
   * @default - no limit (the stream keeps records for 24 hours)
   */
  readonly maxRecordAge?: Duration;

  /**
   * @default Duration.seconds(30)
   */
  readonly functionTimeout?: Duration;

  /**
   * @default 256
   */
  readonly memorySize?: number;

  /**
   * Alarm when the relay's stream iterator age (how old the newest record it read was) stays
   * above this for a minute: events are reaching the buses late. 1 second to 24 hours.
   * @default Duration.minutes(5)
   */
  readonly maxIteratorAge?: Duration;
}

/**
 * The outbox relay: reads new events from the events table stream (inserts only, in per-item
 * order) and publishes each to the bus of its topic. Batches that keep failing are halved, retried,
 * and finally recorded in an encrypted failure queue, which alarms when not empty; the stream
 * iterator age alarms above `maxIteratorAge`.
 */
export class Relay extends Construct {
  readonly function: AgentBusFunction;
  /**
   * Where the batches the relay gave up on are recorded: the keys of their unpublished events by
   * the relay itself, their stream positions by the stream event source.
   */
  readonly failureQueue: Queue;
  readonly failureAlarm: Alarm;
  /** The relay is behind the events table stream by more than `maxIteratorAge`. */
  readonly iteratorAgeAlarm: Alarm;
  /** Every alarm of the relay. */
  readonly alarms: readonly Alarm[];
  private readonly wiredSubscriberBuses = new Set<string>();
  private readonly directGroups: DirectGroup[] = [];

  constructor(scope: Construct, id: string, props: RelayProps) {
    super(scope, id);
    const settings = relaySettings(props);

    this.failureQueue = this.createFailureQueue();

    this.function = new AgentBusFunction(this, "Resource", {
      kind: "relay",
      entry: HUB_HANDLERS.relay,
      description: "AgentBus relay: events table stream -> topic buses",
      timeout: props.functionTimeout,
      memorySize: props.memorySize,
      // The relay records the keys of the events it could not publish in the failure queue.
      environment: { ...settings.environment, RELAY_FAILURE_QUEUE_URL: this.failureQueue.queueUrl },
      unscopedActions: {
        "dynamodb:ListStreams":
          "the DynamoDB stream event source needs it; it lists the streams of the account rather than acting on one stream, so it is granted on * (grantStreamRead)",
      },
    });
    this.function.addEventSource(
      new DynamoEventSource(props.tables.events, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: settings.batchSize,
        parallelizationFactor: settings.parallelizationFactor,
        maxBatchingWindow: props.maxBatchingWindow,
        bisectBatchOnError: true,
        retryAttempts: settings.retryAttempts,
        maxRecordAge: props.maxRecordAge,
        reportBatchItemFailures: true,
        onFailure: new SqsDlq(this.failureQueue),
        filters: [FilterCriteria.filter({ eventName: FilterRule.isEqual("INSERT") })],
      }),
    );
    props.tables.grantEventsStream(this.function);
    this.failureQueue.grantSendMessages(this.function);
    for (const topic of props.topics) topic.grantPutEvents(this.function);

    this.failureAlarm = alarmAbove(
      this,
      "FailureAlarm",
      this.metricFailureDepth(),
      0,
      `relay: stream batches given up on (events not published). ${ALARM_ACTIONS.relayFailures}.`,
    );
    const maxAge = settings.maxIteratorAge;
    this.iteratorAgeAlarm = alarmAbove(
      this,
      "IteratorAgeAlarm",
      this.metricIteratorAge(),
      maxAge.toMilliseconds(),
      `relay: more than ${maxAge.toHumanString()} behind the events table stream (it keeps 24 hours). ${ALARM_ACTIONS.relayBehind}.`,
    );
    this.alarms = [this.failureAlarm, this.iteratorAgeAlarm];
  }

  /**
   * Where the stream event source records the positions of the batches the relay gave up on, and
   * the relay the keys of the events it could not publish.
   */
  private createFailureQueue(): Queue {
    const queue = new Queue(this, "FailureQueue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: retentionAt(this, "deadLetterQueues"),
    });
    Validations.of(queue.node.defaultChild as CfnQueue).acknowledge({
      id: "AwsSolutions-SQS3",
      reason:
        "The failure queue is itself a dead-letter destination: the stream event source's OnFailure target, where the positions of batches the relay gave up on are recorded, and where the relay records the keys of the events it could not publish. Nothing consumes it (an operator republishes from it), it alarms when not empty, and a DLQ behind it would have nothing to catch",
    });
    return queue;
  }

  /** How far behind the events table stream the relay is (`IteratorAge`, Maximum, 1 minute). */
  metricIteratorAge(options?: MetricOptions): Metric {
    return this.function.metric("IteratorAge", {
      statistic: "Maximum",
      period: Duration.minutes(1),
      ...options,
    });
  }

  /** A metric the relay publishes (namespace `AgentBus`, dimension `service`; Sum, 5 minutes). */
  metricRelay(metricName: RelayMetric, options?: MetricOptions): Metric {
    return new Metric({
      namespace: METRICS_NAMESPACE,
      metricName,
      dimensionsMap: { service: RELAY_METRICS_SERVICE },
      statistic: "Sum",
      period: Duration.minutes(5),
      ...options,
    });
  }

  /** Events published to their topic's bus. */
  metricRelayed(options?: MetricOptions): Metric {
    return this.metricRelay("Relayed", options);
  }

  /** PutEvents calls made (at most 10 entries each). */
  metricPutEventsCalls(options?: MetricOptions): Metric {
    return this.metricRelay("PutEventsCalls", options);
  }

  /** Entries PutEvents failed and the relay retried within the call. */
  metricRetriedEntries(options?: MetricOptions): Metric {
    return this.metricRelay("RelayRetriedEntries", options);
  }

  /** Records of failed batches waiting in the failure queue (Maximum, 1 minute). */
  metricFailureDepth(options?: MetricOptions): Metric {
    return this.failureQueue.metricApproximateNumberOfMessagesVisible({
      statistic: "Maximum",
      period: Duration.minutes(1),
      ...options,
    });
  }

  /**
   * The groups the relay delivers itself (`delivery: "relay"`, and the A2A push queue): their FIFO
   * queues' names, their tenant lanes (`tenantConcurrency`, when set) and their rules' patterns in
   * `DIRECT_GROUPS` (JSON, compressed past 1 KB: functions/core/packed-json.ts),
   * and `sqs:SendMessage` (which SendMessageBatch needs) on exactly those queues. A queue is named,
   * not given by URL: its URL is the failure queue's with its own name, both queues of this stack
   * (same account and Region), so the value holds no token and packs. No resource of its own: a
   * statement in the relay's policy. Called again, it adds to those already given.
   */
  deliverTo(groups: readonly DirectlyDelivered[]): void {
    const direct = groups.filter((g) => g.relayRules !== undefined);
    if (direct.length === 0) return;
    this.directGroups.push(
      ...direct.map((g) => ({
        group: g.groupName,
        queue: queueNameOf(g.queue),
        ...(g.tenantConcurrency === undefined ? {} : { tenantConcurrency: g.tenantConcurrency }),
        rules: g.relayRules ?? {},
      })),
    );
    this.function.addEnvironment(DIRECT_GROUPS_ENV, packJson(this.directGroups));
    for (const group of direct) group.queue.grant(this.function, "sqs:SendMessage");
  }

  /**
   * A topic that a `delivery: "subscriber"` group reads has a new bus besides its classic one: the
   * relay publishes to both, that one's ARN in `BUS_V2_<TOPIC>`, with `events:PutEvents` on it.
   * Called once every group has asked for its topics' buses; a topic already wired is skipped.
   */
  publishToSubscriberBuses(topics: readonly Topic[]): void {
    for (const topic of topics) {
      const bus = topic.subscriberBusIfAny;
      const name = `BUS_V2_${topic.topicName.toUpperCase()}`;
      if (!bus || this.wiredSubscriberBuses.has(name)) continue;
      this.wiredSubscriberBuses.add(name);
      this.function.addEnvironment(name, bus.attrEventBusArn);
      topic.grantPutEventsToSubscriberBus(this.function);
    }
  }
}

/** A group as `Relay.deliverTo` reads it (a ConsumerGroup). */
export interface DirectlyDelivered {
  readonly groupName: string;
  readonly queue: IQueue;
  /** Its tenant lanes, which the relay computes as its dispatch function does. */
  readonly tenantConcurrency?: number;
  /** Its rules' patterns but their source, by topic, when the relay delivers it. */
  readonly relayRules?: Readonly<Record<string, unknown>>;
}

/** The physical name of a queue of the stack (they are all named at synth: no token). */
export function queueNameOf(queue: IQueue): string {
  const name = (queue.node.defaultChild as CfnQueue | undefined)?.queueName;
  if (!name || Token.isUnresolved(name))
    throw new Error(`relay: the queue ${queue.node.path} has no name known at synth`);
  return name;
}

/** The relay's props with their defaults, checked; throws naming the bad value. */
function relaySettings(props: RelayProps) {
  if (props.topics.length === 0) throw new Error("relay: topics must not be empty");
  const environment: Record<string, string> = {};
  for (const topic of props.topics) {
    const name = `BUS_${topic.topicName.toUpperCase()}`;
    if (environment[name] !== undefined) {
      throw new Error(`relay: topic ${JSON.stringify(topic.topicName)} is given twice`);
    }
    environment[name] = topic.busName;
  }
  const batchSize = props.batchSize ?? 100;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000) {
    throw new Error(`relay: batchSize is ${batchSize}, must be an integer from 1 to 10000`);
  }
  const parallelizationFactor = props.parallelizationFactor ?? 1;
  if (
    !Number.isInteger(parallelizationFactor) ||
    parallelizationFactor < 1 ||
    parallelizationFactor > 10
  ) {
    throw new Error(
      `relay: parallelizationFactor is ${parallelizationFactor}, must be an integer from 1 to 10`,
    );
  }
  const retryAttempts = props.retryAttempts ?? 10;
  if (!Number.isInteger(retryAttempts) || retryAttempts < 0 || retryAttempts > 10_000) {
    throw new Error(`relay: retryAttempts is ${retryAttempts}, must be an integer from 0 to 10000`);
  }
  const maxIteratorAge = props.maxIteratorAge ?? Duration.minutes(5);
  const seconds = maxIteratorAge.toSeconds({ integral: false });
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 86_400) {
    throw new Error(
      `relay: maxIteratorAge is ${maxIteratorAge.toHumanString()}, must be whole seconds from 1 second to 24 hours`,
    );
  }
  return { environment, batchSize, parallelizationFactor, retryAttempts, maxIteratorAge };
}

/** An alarm when one datapoint of `metric` is above `threshold`; no data is no problem. */
function alarmAbove(
  scope: Construct,
  id: string,
  metric: Metric,
  threshold: number,
  description: string,
): Alarm {
  return new Alarm(scope, id, {
    metric,
    threshold,
    comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: TreatMissingData.NOT_BREACHING,
    alarmDescription: description,
  });
}
