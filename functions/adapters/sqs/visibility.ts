import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { type AgentBusError, PermanentError, TransientError } from "../../core/errors";
import type { AwsClient } from "../aws/client";
import { ChangeMessageVisibility, ChangeMessageVisibilityBatch } from "../aws/operations";
import { snakeCase } from "../sdk-errors";

/** SQS caps a message's visibility timeout at 12 hours. */
export const MAX_VISIBILITY_SECONDS = 12 * 3600;

/**
 * Sets the visibility timeout of a received message to `seconds` from now: used as retry backoff
 * (a failed message reappears after `seconds`) and as a heartbeat for long work. Values are
 * rounded and clamped to SQS's range [0, 43200].
 * Throws TransientError on throttling / outages and PermanentError when SQS refuses the handle
 * (for example the message was deleted or is no longer in flight): heartbeating it cannot help.
 */
export async function extendVisibility(
  client: AwsClient,
  queueUrl: string,
  receiptHandle: string,
  seconds: number,
): Promise<void> {
  const timeout = Math.min(MAX_VISIBILITY_SECONDS, Math.max(0, Math.round(seconds)));
  try {
    await client.send(
      ChangeMessageVisibility({
        QueueUrl: queueUrl,
        ReceiptHandle: receiptHandle,
        VisibilityTimeout: timeout,
      }),
    );
  } catch (error) {
    throw visibilityFailure(error);
  }
}

/**
 * Makes received messages visible again at once (visibility 0), in calls of at most 10.
 * Used for the messages a FIFO batch skipped behind a failed one: left in flight they would hold
 * their message group back for the full visibility timeout instead of the failed message's backoff.
 * Returns the receipt handles SQS refused (already deleted, or no longer in flight).
 */
export async function releaseMessages(
  client: AwsClient,
  queueUrl: string,
  receiptHandles: readonly string[],
): Promise<string[]> {
  const refused: string[] = [];
  for (let i = 0; i < receiptHandles.length; i += 10) {
    const chunk = receiptHandles.slice(i, i + 10);
    try {
      const response = await client.send(
        ChangeMessageVisibilityBatch({
          QueueUrl: queueUrl,
          Entries: chunk.map((handle, index) => ({
            Id: String(index),
            ReceiptHandle: handle,
            VisibilityTimeout: 0,
          })),
        }),
      );
      for (const failed of response.Failed ?? []) refused.push(chunk[Number(failed.Id)] ?? "");
    } catch (error) {
      throw visibilityFailure(error);
    }
  }
  return refused;
}

function visibilityFailure(error: unknown): AgentBusError {
  const e = error as Parameters<typeof isThrottlingError>[0] & { $fault?: string };
  const name = error instanceof Error ? error.name : "Error";
  const message = `ChangeMessageVisibility failed: ${error instanceof Error ? error.message : String(error)}`;
  if (isThrottlingError(e)) return new TransientError("sqs.throttled", message, { cause: error });
  if (isTransientError(e) || isServerError(e) || e.$fault !== "client")
    return new TransientError("sqs.unavailable", message, { cause: error });
  return new PermanentError(`sqs.${snakeCase(name)}`, message, { cause: error });
}
