import { PermanentError, UnknownOutcomeError } from "../../../../kit";

/**
 * The reply channel as the sender sees it: `send` with the step's idempotency key, and `query`
 * by key to learn what happened after an unclear outcome. A channel with idempotency of its own
 * (SNS FIFO deduplication) says for how long a resend of a key is safe. Errors follow the
 * side-effect contract (functions/core/side-effects.ts): ChannelTimeoutError when the outcome is
 * unclear, ChannelRejectedError for a refusal, TransientError when nothing happened.
 */
export interface ChannelSendRequest {
  /** The idempotency key: the same for every retry of the same logical send. */
  readonly key: string;
  readonly recipient: string;
  readonly conversationId: string;
  readonly text: string;
}

export type ChannelQueryResult =
  | { readonly status: "delivered"; readonly deliveryId: string }
  | { readonly status: "not_found" }
  | { readonly status: "unknown" };

export interface ChannelPort {
  readonly name: string;
  /**
   * When set, the channel itself drops a resend of a key within this many seconds of the key's
   * first send (for example SNS FIFO deduplication): while the side-effect record is younger than
   * that, a resend with the same key is safe even when `query` cannot tell what happened.
   */
  readonly resendSafeWithinSeconds?: number;
  send(request: ChannelSendRequest): Promise<{ deliveryId: string }>;
  query(key: string): Promise<ChannelQueryResult>;
}

/** The channel did not answer in time: the send may or may not have happened. */
export class ChannelTimeoutError extends UnknownOutcomeError {
  constructor(message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super("channel.timeout", message, options);
  }
}

/** The channel refused the send for good (bad recipient, no permission, ...). */
export class ChannelRejectedError extends PermanentError {
  /** The channel's own reason (`invalid_recipient`, `InvalidParameter`, ...). */
  readonly reason: string;
  constructor(reason: string, message: string, options?: { cause?: unknown }) {
    super("channel.rejected", message, { ...options, details: { reason } });
    this.reason = reason;
  }
}
