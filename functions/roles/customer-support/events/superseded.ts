import * as z from "../../../../schemas/zod";
import { defineEventType, OpaqueId, streamFact } from "../../../kit";

/**
 * A support turn that will get no reply (seed 000 §11.5): a newer message of the customer
 * superseded it before its reply went out, and the turn of that message answers instead. The
 * group that drops the turn's work as `superseded` (reply generation before its model call, the
 * sender before its channel call) appends the fact to its own stream with the discard, so the
 * conversation view (and its stream) shows the turn `superseded` with the turn that answers it,
 * and a rebuild of the view from the event store shows it again.
 */

export const SUPPORT_SUPERSEDED = "support.superseded";

export const SupportSupersededPayload = z.object({
  conversation_id: OpaqueId,
  /** The task of the turn that answers instead: the conversation's newest message's. */
  superseded_by: OpaqueId,
});
export type SupportSuperseded = z.output<typeof SupportSupersededPayload>;

export function defineSupportSupersededEvents() {
  return [
    defineEventType({
      ...streamFact,
      type: SUPPORT_SUPERSEDED,
      description:
        "A support turn will get no reply: a newer message of the customer superseded it, and the turn it names answers instead.",
      payload: SupportSupersededPayload,
    }),
  ] as const;
}
