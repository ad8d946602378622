import { Duration } from "aws-cdk-lib";
import { type IQueue, Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import {
  type ConsumerGroupSettings,
  DISPATCH_TIMEOUT,
  DLQ_RETENTION,
} from "./consumer-group-settings";

/** Every queue of a consumer group. */
export interface GroupQueues {
  /** The group's queue: FIFO (keyed by order key, de-duplicated by event id) or standard. */
  readonly queue: Queue;
  /** Dead-letter queue of `queue` (FIFO for a FIFO group); the consumer also sends permanent failures here. */
  readonly deadLetterQueue: IQueue;
  /** Standard queue the rules deliver to (FIFO groups only). */
  readonly bufferQueue?: Queue;
  /** Dead letters of the rules' targets, of the buffer queue, and invalid envelopes (FIFO groups only). */
  readonly bufferDeadLetterQueue?: Queue;
}

/**
 * The queues of a group, created in `scope` (the group: construct ids `Resource`,
 * `DeadLetterQueue`, `BufferDeadLetterQueue`, `BufferQueue`): the group's queue and its
 * dead-letter queue (`given`, or a new one), and for a FIFO group the standard buffer queue the
 * rules deliver to, with its own standard dead-letter queue. All encrypted (SQS managed keys) and
 * TLS only; names are explicit (moto needs the `.fifo` name in the template).
 */
export function createGroupQueues(
  scope: Construct,
  settings: ConsumerGroupSettings,
  given: IQueue | undefined,
): GroupQueues {
  const names = settings.queueNames;
  // Content-based dedup stays off on purpose: every sender sets MessageDeduplicationId = event id.
  const fifo = settings.ordering === "fifo" ? { fifo: true, contentBasedDeduplication: false } : {};
  const deadLetterQueue =
    given ??
    new Queue(scope, "DeadLetterQueue", {
      queueName: names.deadLetterQueue,
      ...fifo,
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: DLQ_RETENTION,
    });
  const queue = new Queue(scope, "Resource", {
    queueName: names.queue,
    ...fifo,
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    visibilityTimeout: settings.visibilityTimeout,
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: settings.maxReceiveCount },
  });
  if (settings.ordering !== "fifo") return { queue, deadLetterQueue };
  return { queue, deadLetterQueue, ...createBuffer(scope, settings) };
}

/** Buffer: where the rules deliver; standard, so EventBridge needs no static message group. */
function createBuffer(scope: Construct, settings: ConsumerGroupSettings) {
  const bufferDeadLetterQueue = new Queue(scope, "BufferDeadLetterQueue", {
    queueName: settings.queueNames.bufferDeadLetterQueue,
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: DLQ_RETENTION,
  });
  const bufferQueue = new Queue(scope, "BufferQueue", {
    queueName: settings.queueNames.bufferQueue,
    encryption: QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    visibilityTimeout: Duration.seconds(DISPATCH_TIMEOUT.toSeconds() * 6),
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
