import { CONTENT_EVENT_TYPES } from "./content-agents/events";
import { SUPPORT_EVENT_TYPES } from "./customer-support/events/index";
import { REFUND_EVENT_TYPES } from "./refund-review/events";

/**
 * The event types the reference applications define (customer support, refund review, content
 * production), each list declared by its application: what a function that takes any of their
 * messages without holding their roles (the reference stack's audit group) defines.
 */
export const REFERENCE_EVENT_TYPES = [
  ...SUPPORT_EVENT_TYPES,
  ...REFUND_EVENT_TYPES,
  ...CONTENT_EVENT_TYPES,
];
