import { createHash } from "node:crypto";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { type AgentBusError, TransientError } from "../../../../kit";
import type { AwsClient } from "../../../../lambda";
import { Publish, snakeCase } from "../../../../lambda";
import {
  type ChannelPort,
  type ChannelQueryResult,
  ChannelRejectedError,
  type ChannelSendRequest,
  ChannelTimeoutError,
} from "./port";

/**
 * The message channel on AWS: each reply is published to an SNS FIFO topic (the delivery
 * integrations subscribe to it).
 *
 * - `MessageGroupId` = the conversation id (replies of one conversation stay in order);
 * - `MessageDeduplicationId` = SHA-256 hex of the idempotency key (64 characters; SNS allows 128
 *   and only `A-Za-z0-9` and punctuation, so the key itself is not used);
 * - message attributes `idempotency_key`, `recipient` and `conversation_id`; the body is a JSON
 *   object with the same fields and `text`.
 *
 * SNS cannot be asked whether a message was published, so `query` always answers `unknown`.
 * Within `dedupWindowSeconds` (300 s, SNS FIFO deduplication) of the first publish a resend with
 * the same deduplication id is accepted and dropped by SNS, so resending the same key is safe:
 * `resendSafeWithinSeconds` tells the sender so, with a margin for clock skew and for the time a
 * publish takes (the side-effect record is created before the first publish).
 *
 * Errors: timeouts, aborts and dropped connections (the publish may have happened) ->
 * ChannelTimeoutError; InvalidParameter, InvalidParameterValue, NotFound, AuthorizationError and
 * other client errors -> ChannelRejectedError; throttling, server errors and refused connections
 * -> TransientError `channel.throttled` / `channel.unavailable`.
 */

export interface SnsChannelOptions {
  readonly client: AwsClient;
  readonly topicArn: string;
  readonly name?: string;
  /** Margin taken off the deduplication window for `resendSafeWithinSeconds`. @default 60 */
  readonly safetyMarginSeconds?: number;
}

/** SNS FIFO drops a message whose deduplication id it saw within this many seconds. */
export const SNS_DEDUP_WINDOW_SECONDS = 300;

const TIMEOUT_NAMES = new Set(["TimeoutError", "RequestTimeout", "AbortError", "TimeoutException"]);
const TIMEOUT_CODES = new Set([
  "ETIMEDOUT",
  "ESOCKETTIMEDOUT",
  "ECONNRESET",
  "EPIPE",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
]);
const REJECTED_NAMES = new Set([
  "InvalidParameterException",
  "InvalidParameterValueException",
  "NotFoundException",
  "AuthorizationErrorException",
  "InvalidSecurityException",
  "KMSDisabledException",
  "KMSInvalidStateException",
  "KMSNotFoundException",
  "KMSAccessDeniedException",
  "EndpointDisabledException",
  "ValidationException",
  "AccessDeniedException",
]);

/** The deduplication id of a key: SHA-256 hex. */
export function deduplicationId(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

export class SnsChannel implements ChannelPort {
  readonly name: string;
  readonly dedupWindowSeconds = SNS_DEDUP_WINDOW_SECONDS;
  readonly resendSafeWithinSeconds: number;
  private readonly client: AwsClient;
  private readonly topicArn: string;

  constructor(options: SnsChannelOptions) {
    this.client = options.client;
    this.topicArn = options.topicArn;
    this.name = options.name ?? "sns";
    this.resendSafeWithinSeconds = Math.max(
      0,
      SNS_DEDUP_WINDOW_SECONDS - (options.safetyMarginSeconds ?? 60),
    );
  }

  async send(request: ChannelSendRequest): Promise<{ deliveryId: string }> {
    const attribute = (value: string) => ({ DataType: "String", StringValue: value });
    try {
      const output = await this.client.send(
        Publish({
          TopicArn: this.topicArn,
          Message: JSON.stringify({
            idempotency_key: request.key,
            recipient: request.recipient,
            conversation_id: request.conversationId,
            text: request.text,
          }),
          MessageGroupId: request.conversationId,
          MessageDeduplicationId: deduplicationId(request.key),
          MessageAttributes: {
            idempotency_key: attribute(request.key),
            recipient: attribute(request.recipient),
            conversation_id: attribute(request.conversationId),
          },
        }),
      );
      if (!output.MessageId)
        throw new ChannelTimeoutError(`${this.name}: publish of ${request.key} gave no MessageId`);
      return { deliveryId: output.MessageId };
    } catch (error) {
      throw snsFailure(error, this.name, request.key);
    }
  }

  async query(_key: string): Promise<ChannelQueryResult> {
    return { status: "unknown" };
  }
}

type SdkErrorLike = Parameters<typeof isThrottlingError>[0];

/** Map an error of an SNS Publish to the channel's error contract. */
export function snsFailure(error: unknown, channel: string, key: string): AgentBusError {
  if (
    error instanceof ChannelTimeoutError ||
    error instanceof ChannelRejectedError ||
    error instanceof TransientError
  )
    return error;
  const e = error as SdkErrorLike & { $fault?: string; code?: string };
  const name = error instanceof Error ? error.name : "Error";
  const detail = error instanceof Error ? error.message : String(error);
  const message = `${channel}: publish of ${key} failed: ${name}: ${detail}`;
  if (TIMEOUT_NAMES.has(name) || (e.code !== undefined && TIMEOUT_CODES.has(e.code)))
    return new ChannelTimeoutError(message, { cause: error });
  if (isThrottlingError(e) || name === "ThrottledException" || name === "KMSThrottlingException")
    return new TransientError("channel.throttled", message, { cause: error });
  if (REJECTED_NAMES.has(name))
    return new ChannelRejectedError(snakeCase(name), message, { cause: error });
  if (isTransientError(e) || isServerError(e) || e.$fault !== "client")
    return new TransientError("channel.unavailable", message, { cause: error });
  return new ChannelRejectedError(snakeCase(name), message, { cause: error });
}
