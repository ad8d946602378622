import type { Clock } from "../../core/ports";
import { systemClock } from "../../core/runtime";
import type { QueueDepthSource } from "../../integrations/queue-depth/index";
import type { AwsClient } from "../aws/client";
import { GetQueueAttributes } from "../aws/operations";

export interface SqsQueueDepthOptions {
  readonly client: AwsClient;
  /** Queue URL of each agent group, by group name. */
  readonly queueUrls: Readonly<Record<string, string>>;
  /** How long a read depth is reused. @default 5000 */
  readonly cacheMs?: number;
  readonly clock?: Clock;
  /** Called when a queue's depth cannot be read (the group then counts as 0). */
  readonly onError?: (group: string, error: unknown) => void;
}

/**
 * The orchestrator's queue-depth source on SQS: for each asked-for group with a known queue,
 * ApproximateNumberOfMessages + ApproximateNumberOfMessagesNotVisible (waiting plus in flight)
 * from GetQueueAttributes, cached per group for `cacheMs` (one container handles many events of
 * a run in a row; the numbers are approximate anyway). A group without a queue URL, or whose
 * queue cannot be read, counts as 0: the gate never stops a run because a depth is unknown.
 */
export function sqsQueueDepth(options: SqsQueueDepthOptions): QueueDepthSource {
  const cacheMs = options.cacheMs ?? 5000;
  const clock = options.clock ?? systemClock;
  const cache = new Map<string, { at: number; depth: number }>();

  const read = async (group: string, url: string): Promise<number> => {
    const now = clock.now().getTime();
    const hit = cache.get(group);
    if (hit && now - hit.at < cacheMs) return hit.depth;
    try {
      const depth = await readQueueDepth(options.client, url);
      cache.set(group, { at: now, depth });
      return depth;
    } catch (error) {
      options.onError?.(group, error);
      return hit?.depth ?? 0;
    }
  };

  return async (groups) => {
    const depths: Record<string, number> = {};
    await Promise.all(
      groups.map(async (group) => {
        const url = options.queueUrls[group];
        if (url) depths[group] = await read(group, url);
      }),
    );
    return depths;
  };
}

/**
 * A queue's messages, waiting and in flight (ApproximateNumberOfMessages +
 * ApproximateNumberOfMessagesNotVisible), from one GetQueueAttributes; throws when it fails.
 */
export async function readQueueDepth(client: AwsClient, queueUrl: string): Promise<number> {
  const { Attributes = {} } = await client.send(
    GetQueueAttributes({
      QueueUrl: queueUrl,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  );
  return (
    Number(Attributes.ApproximateNumberOfMessages ?? 0) +
    Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}
