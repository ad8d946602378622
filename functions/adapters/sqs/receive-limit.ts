import type { AwsClient } from "../aws/client";
import { GetQueueAttributes } from "../aws/operations";

/**
 * The `maxReceiveCount` of a queue's redrive policy: after that many receives SQS moves a
 * message to the dead-letter queue by itself. Read once (GetQueueAttributes, which every Lambda
 * SQS consumer is allowed on its own queue) and kept; a failed read is tried again next time.
 * Undefined when the queue has no redrive policy.
 */
export function queueReceiveLimit(
  client: AwsClient,
  queueUrl: string,
): () => Promise<number | undefined> {
  let known: Promise<number | undefined> | undefined;
  return () => {
    known ??= read(client, queueUrl).catch((error: unknown) => {
      known = undefined;
      throw error;
    });
    return known;
  };
}

async function read(client: AwsClient, queueUrl: string): Promise<number | undefined> {
  const { Attributes = {} } = await client.send(
    GetQueueAttributes({ QueueUrl: queueUrl, AttributeNames: ["RedrivePolicy"] }),
  );
  if (!Attributes.RedrivePolicy) return undefined;
  const policy = JSON.parse(Attributes.RedrivePolicy) as { maxReceiveCount?: number | string };
  const limit = Number(policy.maxReceiveCount);
  return Number.isInteger(limit) && limit > 0 ? limit : undefined;
}
