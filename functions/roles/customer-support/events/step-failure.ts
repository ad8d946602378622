import * as z from "../../../../schemas/zod";
import { defineEventType, OpaqueId, streamFact } from "../../../kit";

/**
 * A step of the customer-support workflow that failed for good (seed 000 §11.3): the
 * order lookup or reply generation could not do its work (a model that refuses every call, an
 * orders table it may not read, retries used up). The router applies fixed rules and cannot fail. The failing group appends
 * `support.step.failed` to its own stream instead of dead-lettering the command, and asks the
 * sender for the hand-off message in the same commit, so the conversation view shows the outcome
 * and the customer hears from the shop once.
 */

export const SUPPORT_STEPS = ["order_lookup", "reply_generation"] as const;
export type SupportStep = (typeof SUPPORT_STEPS)[number];

export const StepFailedPayload = z.object({
  conversation_id: OpaqueId,
  step: z.enum(SUPPORT_STEPS),
  /** The error's dotted code (`model.access_denied`, `dynamodb.access_denied`, ...). */
  code: z.string().check(z.minLength(1), z.maxLength(128)),
  /** The error's message, cut to 1,000 characters; never the customer's text. */
  message: z.string().check(z.maxLength(1000)),
  /** True when the customer was sent the hand-off message for this turn. */
  handed_off: z.boolean(),
});
export type StepFailed = z.output<typeof StepFailedPayload>;

export function defineSupportFailureEvents() {
  return [
    defineEventType({
      ...streamFact,
      type: "support.step.failed",
      description:
        "A step of the support workflow failed for good; the customer is handed off to a person.",
      payload: StepFailedPayload,
    }),
  ] as const;
}
