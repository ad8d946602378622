import { createHash } from "node:crypto";
import type { DeadLetterSink } from "../../core/ports";
import type { AwsClient } from "../aws/client";
import { SendMessage } from "../aws/operations";
import { sendFailure } from "./send-failure";

/** Message attributes a dead letter carries (an operator reads them before a redrive). */
export const DEAD_LETTER_ATTRIBUTES = {
  code: "agentbus.error_code",
  reason: "agentbus.error_reason",
  /** How many times the source queue had handed the message out (when known). */
  receiveCount: "agentbus.receive_count",
} as const;
/** Longest reason kept (in characters); the rest is cut. */
export const MAX_REASON_CHARS = 1000;
/** MessageGroupId of dead letters sent without one to a FIFO dead-letter queue. */
export const DEFAULT_DEAD_LETTER_GROUP = "dead-letters";

/** A dead letter as the port (DeadLetterSink) describes it. */
type DeadLetter = Parameters<DeadLetterSink["send"]>[0];

export interface SqsDeadLetterSinkOptions {
  /** Created once per container by the caller. */
  readonly client: AwsClient;
  /** Standard or FIFO queue URL; FIFO (`.fifo`) gets a group and a deduplication id. */
  readonly queueUrl: string;
}

/**
 * Sends an unprocessable message straight to a dead-letter queue with its error code and reason
 * as message attributes, instead of letting it burn the source queue's retries. Any failure of the
 * call throws TransientError: the source message then stays on its queue and is retried.
 */
export class SqsDeadLetterSink implements DeadLetterSink {
  private readonly client: AwsClient;
  private readonly queueUrl: string;
  private readonly fifo: boolean;

  constructor(options: SqsDeadLetterSinkOptions) {
    this.client = options.client;
    this.queueUrl = options.queueUrl;
    this.fifo = options.queueUrl.endsWith(".fifo");
  }

  async send(message: DeadLetter): Promise<void> {
    try {
      await this.client.send(
        SendMessage({
          QueueUrl: this.queueUrl,
          MessageBody: message.body,
          MessageAttributes: {
            // SQS refuses empty string attribute values.
            [DEAD_LETTER_ATTRIBUTES.code]: { DataType: "String", StringValue: message.code || "-" },
            [DEAD_LETTER_ATTRIBUTES.reason]: {
              DataType: "String",
              StringValue: truncate(message.reason, MAX_REASON_CHARS) || "-",
            },
            ...(message.receiveCount !== undefined
              ? {
                  [DEAD_LETTER_ATTRIBUTES.receiveCount]: {
                    DataType: "Number",
                    StringValue: String(message.receiveCount),
                  },
                }
              : {}),
          },
          ...(this.fifo
            ? {
                MessageGroupId: message.groupId ?? DEFAULT_DEAD_LETTER_GROUP,
                MessageDeduplicationId:
                  message.deduplicationId ??
                  createHash("sha256").update(message.body).digest("hex"),
              }
            : {}),
        }),
      );
    } catch (error) {
      throw sendFailure(error, `SendMessage to the dead-letter queue ${this.queueUrl}`);
    }
  }
}

/** At most `max` characters (code points, so a surrogate pair is never split). */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  return Array.from(text).slice(0, max).join("");
}
