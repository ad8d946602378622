import type { LearntBy, OutputRecord, OutsideWrite, SideEffectResult } from "../../../kit";
import type { Delivered } from "../events/conversation";
import {
  type ChannelPort,
  ChannelRejectedError,
  type ChannelSendRequest,
} from "../integrations/reply-channel/port";

/** The side-effect kind of a send (the `reply` in `<task_id>:reply:<n>`). */
export const REPLY_KIND = "reply";
/** The code of a send whose outcome the channel could not tell. */
export const OUTCOME_UNKNOWN = "channel.outcome_unknown";

/**
 * A send through the reply channel as an outside write (functions/core/write-once.ts): the send
 * under the step's key, the channel's query by key, its own deduplication window as the time a
 * resend is safe (`resendSafeWithinSeconds`), a ChannelRejectedError as its one refusal (recorded
 * as `<reason>: <message>`), the delivery id kept with the record, and the sender's words for an
 * outcome it cannot learn.
 */
export function channelSend(
  channel: ChannelPort,
  request: ChannelSendRequest,
): OutsideWrite<string> {
  return {
    name: channel.name,
    call: async () => (await channel.send(request)).deliveryId,
    async query() {
      const found = await channel.query(request.key);
      if (found.status === "delivered") return { status: "applied", output: found.deliveryId };
      return found.status === "not_found" ? { status: "not_applied" } : found;
    },
    resendSafeWithinSeconds: channel.resendSafeWithinSeconds,
    refusal: (error) =>
      error instanceof ChannelRejectedError
        ? { code: error.code, message: `${error.reason}: ${error.message}` }
        : undefined,
    recorded: DELIVERY_ID,
    causes: {
      "query timed out": "the channel's status query timed out",
      "could not tell": "the channel could not tell whether it was sent",
      "timed out twice": "the send timed out twice, the channel had not seen the first",
    },
  };
}

/** A send's record keeps the channel's delivery id. */
export const DELIVERY_ID: OutputRecord<string> = {
  write: (deliveryId): SideEffectResult => ({ delivery_id: deliveryId }),
  read: (result) => result?.delivery_id ?? "unrecorded",
};

/** How a delivery was confirmed, as `notification.delivered` says it. */
export function confirmedBy(by: LearntBy): Delivered["confirmed_by"] {
  if (by === "record") return "record";
  return by === "query" || by === "query after timeout" ? "query" : "send";
}
