import * as z from "../../../../schemas/zod";
import {
  defineEventType,
  OpaqueId,
  outsideCommand,
  RequestedByShape,
  streamFact,
} from "../../../kit";
import { ReplyKey } from "./fields";

/**
 * Cancelling one support turn (seed 000 §11.5): an operator or a client asks that the reply to
 * one customer message (one task) is not sent. The sender takes the command on
 * `delivery/<task_id>`, with order key = conversation id, so it is ordered with the turn's sends:
 * a send it has not made yet is discarded as `cancelled`; a reply already delivered stays
 * delivered.
 */

export const SUPPORT_CANCEL_REQUESTED = "support.cancel.requested";
export const SUPPORT_CANCELLED = "support.cancelled";

/** Unsequenced: aggregate `delivery/<task_id>` at version 0, order key = conversation id. */
export const SupportCancelRequestedPayload = z.object({
  conversation_id: OpaqueId,
  ...RequestedByShape,
});
export type SupportCancelRequested = z.output<typeof SupportCancelRequestedPayload>;

export const SupportCancelledPayload = z.extend(SupportCancelRequestedPayload, {
  /** The turn's reply keys delivered before the cancel: they stay delivered. */
  delivered_keys: z.array(ReplyKey).check(z.maxLength(20)),
});
export type SupportCancelled = z.output<typeof SupportCancelledPayload>;

export function defineSupportCancelEvents() {
  return [
    defineEventType({
      ...outsideCommand,
      type: SUPPORT_CANCEL_REQUESTED,
      description:
        "Cancel one support turn: its reply is not sent if it has not been yet (sent by an operator or a client; aggregate delivery/<task_id>, version 0).",
      payload: SupportCancelRequestedPayload,
    }),
    defineEventType({
      ...streamFact,
      type: SUPPORT_CANCELLED,
      description:
        "The sender recorded the cancel of a support turn: sends of it not made yet are discarded as cancelled.",
      payload: SupportCancelledPayload,
    }),
  ] as const;
}
