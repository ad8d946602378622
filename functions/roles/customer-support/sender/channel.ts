import type { Delivered } from "../../../../schemas/events/conversation";
import type { DiscardReason, SideEffectRecord } from "../../../kit";
import {
  type ChannelPort,
  ChannelRejectedError,
  type ChannelSendRequest,
  ChannelTimeoutError,
} from "../integrations/reply-channel/port";

/** What the sender learned from the channel about one key. */
export type Outcome =
  | {
      readonly kind: "delivered";
      readonly deliveryId: string;
      readonly by: Delivered["confirmed_by"];
    }
  | { readonly kind: "rejected"; readonly error: ChannelRejectedError }
  | { readonly kind: "unresolved"; readonly cause: string };

/**
 * The sender's calls to its channel, always with the same idempotency key (seed 000 §11.4):
 * send; after a timeout query; resend only when the channel says it never saw the key, or when
 * the channel drops repeats of a key by itself and the record is inside that window.
 */
export class ChannelCalls {
  constructor(private readonly channel: ChannelPort) {}

  /** A fresh claim: send (resolving a timeout), then one resend inside the channel's dedup window. */
  async firstSend(
    request: ChannelSendRequest,
    record: SideEffectRecord,
    now: Date,
  ): Promise<Outcome> {
    const outcome = await this.sendResolving(request);
    if (outcome.kind === "unresolved" && this.resendSafe(record, now))
      return (await this.trySend(request)) ?? outcome;
    return outcome;
  }

  /**
   * An earlier attempt may have sent: query first. While `resolving` (the command is discarded:
   * expired, superseded, cancelled, invalidated) nothing is sent again: a key the channel never
   * saw is `not_sent`.
   */
  async resolveEarlier(
    request: ChannelSendRequest,
    record: SideEffectRecord,
    now: Date,
    resolving: DiscardReason | undefined,
  ): Promise<Outcome | "not_sent"> {
    const found = await this.query(request.key);
    if (found === "not_found") return resolving ? "not_sent" : this.sendResolving(request);
    if (found.kind === "unresolved" && !resolving && this.resendSafe(record, now))
      return (await this.trySend(request)) ?? found;
    return found;
  }

  /** A send a person asked for again, under the same key: send, and after a timeout query. */
  resend(request: ChannelSendRequest): Promise<Outcome> {
    return this.sendResolving(request);
  }

  /** One send call with the key: its answer, or undefined after a timeout. */
  private async trySend(request: ChannelSendRequest): Promise<Outcome | undefined> {
    try {
      const { deliveryId } = await this.channel.send(request);
      return { kind: "delivered", deliveryId, by: "send" };
    } catch (error) {
      if (error instanceof ChannelRejectedError) return { kind: "rejected", error };
      if (error instanceof ChannelTimeoutError) return undefined;
      throw error;
    }
  }

  private async query(key: string): Promise<Outcome | "not_found"> {
    let answer: Awaited<ReturnType<ChannelPort["query"]>>;
    try {
      answer = await this.channel.query(key);
    } catch (error) {
      if (error instanceof ChannelTimeoutError)
        return { kind: "unresolved", cause: "the channel's status query timed out" };
      throw error;
    }
    if (answer.status === "delivered")
      return { kind: "delivered", deliveryId: answer.deliveryId, by: "query" };
    if (answer.status === "not_found") return "not_found";
    return { kind: "unresolved", cause: "the channel could not tell whether it was sent" };
  }

  /** Send, and after a timeout query; not found -> one more send. */
  private async sendResolving(request: ChannelSendRequest): Promise<Outcome> {
    const sent = await this.trySend(request);
    if (sent) return sent;
    const found = await this.query(request.key);
    if (found !== "not_found") return found;
    return (
      (await this.trySend(request)) ?? {
        kind: "unresolved",
        cause: "the send timed out twice, the channel had not seen the first",
      }
    );
  }

  private resendSafe(record: SideEffectRecord, now: Date): boolean {
    const window = this.channel.resendSafeWithinSeconds;
    if (window === undefined || window <= 0) return false;
    return now.getTime() - Date.parse(record.created_at) < window * 1000;
  }
}
