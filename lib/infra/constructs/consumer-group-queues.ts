import { Duration, Validations } from "aws-cdk-lib";
import {
  type CfnQueue,
  DeduplicationScope,
  FifoThroughputLimit,
  type IQueue,
  Queue,
  QueueEncryption,
} from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import { retentionAt } from "../retention";
import {
  type ConsumerGroupSettings,
  DISPATCH_TIMEOUT,
  hasFifoQueues,
} from "./consumer-group-settings";

/** Every queue of a consumer group. */
export interface GroupQueues {
  /** The group's queue: FIFO (keyed by order key, de-duplicated by event id) or standard. */
  readonly queue: Queue;
  /** Dead-letter queue of `queue` (FIFO for a FIFO group); the consumer also sends permanent failures here. */
  readonly deadLetterQueue: IQueue;
  /** Standard queue the rules deliver to (FIFO groups, except `delivery: "subscriber"`). */
  readonly bufferQueue?: Queue;
  /**
   * Dead letters of the rules' targets, of the buffer queue, and invalid envelopes (FIFO groups);
   * with `delivery: "subscriber"` the subscribers' on-failure records (ids, no payload).
   */
  readonly bufferDeadLetterQueue?: Queue;
}

/**
 * What makes a queue FIFO here: high-throughput mode (deduplication and the throughput quota per
 * message group, so a queue scales with its number of active groups across partitions instead of
 * stopping at 300 calls per second per API action) and no content-based deduplication (every
 * sender sets MessageDeduplicationId). Per-group deduplication is exactly as safe as per-queue
 * here: a message's dedup id is its event id (or derived from it, for a replay or a dead letter),
 * and an event always travels in the group of its order key, so a repeat within the 5 minutes is
 * always in the same group as the original. The dead-letter queue takes the same mode: it is a
 * FIFO queue the consumer sends to (permanent failures) while its source runs at full rate, and
 * the mode costs nothing.
 */
export const FIFO_QUEUE_SETTINGS = {
  fifo: true,
  contentBasedDeduplication: false,
  deduplicationScope: DeduplicationScope.MESSAGE_GROUP,
  fifoThroughputLimit: FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
} as const;

/**
 * The queues of a group, created in `scope` (the group: construct ids `Resource`,
 * `DeadLetterQueue`, `BufferDeadLetterQueue`, `BufferQueue`): the group's queue and its
 * dead-letter queue (`given`, or a new one), and for a FIFO group the standard buffer queue the
 * rules deliver to, with its own standard dead-letter queue. FIFO queues run in high-throughput
 * mode (`FIFO_QUEUE_SETTINGS`). All encrypted (SQS managed keys) and TLS only; names are
 * explicit (moto needs the `.fifo` name in the template).
 */
export function createGroupQueues(
  scope: Construct,
  settings: ConsumerGroupSettings,
  given: IQueue | undefined,
): GroupQueues {
  const names = settings.queueNames;
  const fifo = hasFifoQueues(settings) ? FIFO_QUEUE_SETTINGS : {};
  const deadLetterQueue =
    given ??
    new Queue(scope, "DeadLetterQueue", {
      queueName: names.deadLetterQueue,
      ...fifo,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: retentionAt(scope, "deadLetterQueues"),
    });
  const queue = new Queue(scope, "Resource", {
    queueName: names.queue,
    ...fifo,
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    visibilityTimeout: settings.visibilityTimeout,
    retentionPeriod: retentionAt(scope, "queues"),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: settings.maxReceiveCount },
  });
  if (!hasFifoQueues(settings)) return { queue, deadLetterQueue };
  // A subscriber sends straight to the FIFO queue: no buffer, only the dead letters of its delivery.
  if (settings.delivery === "subscriber") {
    const bufferDeadLetterQueue = createBufferDeadLetterQueue(scope, settings);
    Validations.of(bufferDeadLetterQueue.node.defaultChild as CfnQueue).acknowledge({
      id: "AwsSolutions-SQS3",
      reason:
        "The queue is itself a dead-letter destination: the OnFailureConfiguration of the group's EventBridge subscribers, which cdk-nag does not read. Nothing consumes it, it alarms when not empty, and a DLQ behind it would have nothing to catch",
    });
    return { queue, deadLetterQueue, bufferDeadLetterQueue };
  }
  return { queue, deadLetterQueue, ...createBuffer(scope, settings) };
}

/**
 * Standard: the dead letters of the rules' targets and of the buffer, or (`delivery:
 * "subscriber"`) the subscribers' on-failure records, which name the event but carry no payload.
 */
function createBufferDeadLetterQueue(scope: Construct, settings: ConsumerGroupSettings): Queue {
  return new Queue(scope, "BufferDeadLetterQueue", {
    queueName: settings.queueNames.bufferDeadLetterQueue,
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: retentionAt(scope, "deadLetterQueues"),
  });
}

/** Buffer: where the rules deliver; standard, so EventBridge needs no static message group. */
function createBuffer(scope: Construct, settings: ConsumerGroupSettings) {
  const bufferDeadLetterQueue = createBufferDeadLetterQueue(scope, settings);
  const bufferQueue = new Queue(scope, "BufferQueue", {
    queueName: settings.queueNames.bufferQueue,
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    visibilityTimeout: Duration.seconds(DISPATCH_TIMEOUT.toSeconds() * 6),
    retentionPeriod: retentionAt(scope, "queues"),
    deadLetterQueue: { queue: bufferDeadLetterQueue, maxReceiveCount: settings.maxReceiveCount },
  });
  return { bufferQueue, bufferDeadLetterQueue };
}

/** Every dead-letter queue of a group. */
export function deadLetterQueuesOf(queues: GroupQueues): IQueue[] {
  return [
    queues.deadLetterQueue,
    ...(queues.bufferDeadLetterQueue ? [queues.bufferDeadLetterQueue] : []),
  ];
}
