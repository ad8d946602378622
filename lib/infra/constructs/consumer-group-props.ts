import type { Duration } from "aws-cdk-lib";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import type { AttentionSignal } from "../../../functions/core/attention";
import type { Delivery, Ordering, OrderKey } from "./consumer-group-rules";
import type { ModelSetting } from "./model-access";
import type { AgentBusTables } from "./tables";
import type { Topic } from "./topic";

/**
 * The props of a consumer group (`ConsumerGroup`). `consumer-group-settings.ts` applies their
 * defaults and checks them.
 */

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
   * `functions/roles/task-projection/handler.ts`.
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
   * Receive only unsequenced messages (envelope `aggregate.version` 0: messages no stream holds),
   * for a group that keeps what is stored nowhere else (the audit group): its rules (or
   * subscribers) match `detail.aggregate.version` 0, so the stored events, which the event store
   * already holds, are never delivered to it.
   * @default false
   */
  readonly unsequencedOnly?: boolean;

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
   * How long the consumer's event source gathers a batch (standard queues and the events table's
   * stream, 0..300 s; not FIFO queues).
   * @default - none, or 1 second when `batchSize` is over 10 (Lambda requires one then)
   */
  readonly maxBatchingWindow?: Duration;

  /**
   * How long the delivery hop of a FIFO group (the dispatcher's event source, or the pipe) waits
   * to gather 10 messages from the buffer queue before moving them (whole seconds, 0..300). Under
   * a light load each message then waits up to this long; in exchange every SendMessageBatch call
   * is full, so fewer SQS requests are billed. Without it a batch holds what the buffer had
   * (`npm run bench -- local` prints how full they are under a burst).
   * @default - none: messages move as soon as they arrive
   */
  readonly deliveryBatchingWindow?: Duration;

  /**
   * Most concurrent consumer invocations (event source `MaximumConcurrency`, 2..1000). On a FIFO
   * queue concurrency is also bounded by the number of active message groups.
   * @default 2
   */
  readonly maxConcurrency?: number;

  /**
   * Most consumer invocations one tenant's events may hold at once, 1 to `maxConcurrency - 1`
   * (FIFO groups delivered by the dispatch function or the relay): each tenant's events travel in
   * that many message groups (lanes, an order key always in the same one), so another tenant's
   * message never waits behind one tenant's backlog for an invocation. A tenant alone gets no
   * more than that many; conversations sharing a lane wait for each other.
   * @default - none: one message group per order key
   */
  readonly tenantConcurrency?: number;

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
   * @default - the declared retention of `inboxRows` (functions/core/retention.ts, 7 days)
   */
  readonly inboxTtl?: Duration;
  /**
   * Read the checkpoint and inbox rows a stack kept before checkpoints moved onto the state
   * items, while it upgrades (one BatchGetItem per event instead of one GetItem).
   * @default false
   */
  readonly legacyCheckpoints?: boolean;

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
   * What the group's consumer can emit that a person must act on (functions/core/attention.ts),
   * each watched by an alarm of the signal's metric whose description names the command to run:
   * more than `alarm.tolerated` (default 0) within `alarm.windowMinutes` (default 5). A signal
   * given twice makes one alarm; two different signals of one name, a name that is not
   * kebab-case, or two names of one metric stop the synth.
   * @default none (the stack passes the signals of the rules the topology's group declares)
   */
  readonly attention?: readonly AttentionSignal[];

  /**
   * The language model the consumer calls: `MODEL_PROVIDER` / `MODEL_ID` in its environment and,
   * for Bedrock, `bedrock:InvokeModel` on that model only (see `model-access.ts`).
   * The model integration's infrastructure gives a group that uses it the CDK context's
   * (`ConsumerGroup.callModel`).
   * @default - no model
   */
  readonly model?: ModelSetting;
}
