import { PermanentError } from "../../core/errors";
import type { FifoMessage, FifoSender } from "../../core/ports";
import type { AwsClient } from "../aws/client";
import { SendMessageBatch } from "../aws/operations";
import { sendFailure } from "./send-failure";

/** SendMessageBatch takes at most 10 entries. */
export const MAX_SEND_BATCH_ENTRIES = 10;

export interface SqsFifoSenderOptions {
  /** Created once per container by the caller. */
  readonly client: AwsClient;
  /** URL of the FIFO queue (its name ends with `.fifo`). */
  readonly queueUrl: string;
}

/**
 * Sends up to 10 messages to a FIFO queue in one SendMessageBatch: MessageGroupId orders and
 * serializes per entity, MessageDeduplicationId drops repeats within SQS's 5-minute window.
 * Returns the entries SQS refused (`Failed[]`); any error of the whole call throws TransientError
 * (the caller hands the batch back to its queue).
 */
export class SqsFifoSender implements FifoSender {
  private readonly client: AwsClient;
  private readonly queueUrl: string;

  constructor(options: SqsFifoSenderOptions) {
    this.client = options.client;
    this.queueUrl = options.queueUrl;
  }

  async send(
    messages: readonly FifoMessage[],
  ): Promise<{ id: string; code: string; message: string }[]> {
    if (messages.length === 0) return [];
    if (messages.length > MAX_SEND_BATCH_ENTRIES) {
      throw new PermanentError(
        "sqs.too_many_entries",
        `SendMessageBatch takes at most ${MAX_SEND_BATCH_ENTRIES} entries, got ${messages.length}`,
      );
    }
    try {
      const output = await this.client.send(
        SendMessageBatch({
          QueueUrl: this.queueUrl,
          Entries: messages.map((m) => ({
            Id: m.id,
            MessageBody: m.body,
            MessageGroupId: m.groupId,
            MessageDeduplicationId: m.deduplicationId,
          })),
        }),
      );
      return (output.Failed ?? []).map((f) => ({
        id: f.Id ?? "",
        code: f.Code ?? "Unknown",
        message: f.Message ?? "",
      }));
    } catch (error) {
      throw sendFailure(error, `SendMessageBatch to ${this.queueUrl}`);
    }
  }
}
