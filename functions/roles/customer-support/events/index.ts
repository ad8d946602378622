import type { PayloadTypes } from "../../../kit";
import { defineSupportCommands } from "./commands";
import { defineConversationEvents } from "./conversation";
import { defineSupportFailureEvents } from "./step-failure";
import { defineSupportSupersededEvents } from "./superseded";

/**
 * The customer-support application's event types (the refund agent's are in
 * functions/roles/refund-review/events.ts), defined once, in this order, when this file is first
 * imported. Each of the application's role modules lists them in its `events`, so importing any
 * one of its modules registers them all.
 */
export const SUPPORT_EVENT_TYPES = [
  ...defineConversationEvents(),
  ...defineSupportCommands(),
  ...defineSupportFailureEvents(),
  ...defineSupportSupersededEvents(),
] as const;

// What the refund review's types build on: importing them from here defines this application's
// types before the refund review's (functions/roles/refund-review/events.ts).
export { RefundReviewOutcome, SupportTurn } from "./commands";
export { OrderId } from "./conversation";

declare module "../../../kit" {
  interface EventPayloads extends PayloadTypes<(typeof SUPPORT_EVENT_TYPES)[number]> {}
}
