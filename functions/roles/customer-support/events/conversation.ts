import * as z from "../../../../schemas/zod";
import {
  Channel,
  ClientSeq,
  defineEventType,
  IsoTime,
  MessageText,
  OpaqueId,
  OutputGuardRecord,
  outsideCommand,
  RequestedByShape,
  streamCommand,
  streamFact,
  Ulid,
} from "../../../kit";
import { defineSupportCancelEvents } from "./cancel";
import { ReplyKey } from "./fields";

/**
 * The customer-support conversation (seed 000 §10, §11) on the bus: the application's event types
 * after a customer's message (`conversation.message.received`, the front door's contract, is the
 * hub's: schemas/events/conversation.ts).
 *
 * - The conversation group accepts a message on the conversation's stream: the conversation
 *   version goes up by one (`conversation.message.accepted`) and `support.route.requested`
 *   carries that version as `input_version` and the reply deadline as `expires_at`.
 * - The router (stream `support_route/<task_id>`), order lookup (`order_lookup/<task_id>`), reply
 *   generation (`reply/<task_id>`) and sender (`delivery/<task_id>`) each append their facts and
 *   the next command to their own stream; every command keeps `input_version`, `expires_at` and
 *   `order_key = conversation_id`, so one conversation's work is serialized in each group.
 */

/** A shop's order number as a customer types it ("123", "A-1001"); not an AgentBus id. */
export const OrderId = z.string().check(
  z.regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, {
    message: "must be 1-64 characters of A-Z a-z 0-9 _ - starting with a letter or digit",
  }),
);

export const INTENTS = ["order_status", "refund", "general"] as const;
export const Intent = z.enum(INTENTS);
export type Intent = z.infer<typeof Intent>;

export const REFUND_STATUSES = ["none", "requested", "submitted", "refunded", "rejected"] as const;
export const ORDER_STATUSES = ["placed", "shipped", "delivered", "cancelled", "returned"] as const;

/** One row of the orders table (what order lookup reads and reply generation quotes). */
export const OrderRecord = z.object({
  order_id: OrderId,
  customer_id: OpaqueId,
  status: z.enum(ORDER_STATUSES),
  item: z.string().check(z.minLength(1), z.maxLength(200)),
  total_cents: z.int().check(z.minimum(0)),
  currency: z.string().check(z.regex(/^[A-Z]{3}$/)),
  refund: z.optional(
    z.object({
      status: z.enum(REFUND_STATUSES),
      amount_cents: z.optional(z.int().check(z.minimum(0))),
      updated_at: z.optional(IsoTime),
    }),
  ),
});
export type OrderRecord = z.infer<typeof OrderRecord>;

/** A reply's text as it is held for review or sent. */
const ReplyText = z.string().check(z.minLength(1), z.maxLength(4000));

/** A customer's message as the conversation took it in (the accepted fact's payload). */
export const ConversationTurn = z.object({
  conversation_id: OpaqueId,
  customer_id: OpaqueId,
  channel: Channel,
  text: MessageText,
  /** The client's `conversation.message.received` event id. */
  message_event_id: Ulid,
});

export const MessageAcceptedPayload = z.extend(ConversationTurn, {
  /** The conversation version this message made current. */
  version: z.int().check(z.minimum(1)),
});
export type MessageAccepted = z.output<typeof MessageAcceptedPayload>;

/**
 * The conversation stopped waiting for client sequences it never received (`from`..`to`): the
 * message after them waited its bound, so it was applied without them. A sequence that arrives
 * later is discarded (`superseded`).
 */
export const SequenceSkippedPayload = z.object({
  conversation_id: OpaqueId,
  from: ClientSeq,
  to: ClientSeq,
  /** The message applied in their place (its client sequence is `to` + 1). */
  message_event_id: Ulid,
  /** How long it waited for them, in seconds. */
  waited_seconds: z.number().check(z.minimum(0)),
});
export type SequenceSkipped = z.output<typeof SequenceSkippedPayload>;

export const RoutedPayload = z.object({
  conversation_id: OpaqueId,
  intent: Intent,
  order_id: z.optional(OrderId),
  /** Why the router chose this intent (the rule that matched). */
  rule: z.string().check(z.minLength(1), z.maxLength(200)),
});
export type Routed = z.output<typeof RoutedPayload>;

/** order.lookup.completed v1 (stored v1 events are read as v2: `looked_up_at` = occurred_at). */
export const OrderLookupCompletedV1Payload = z.object({
  conversation_id: OpaqueId,
  order_id: OrderId,
  /** False when there is no such order or it belongs to another customer. */
  found: z.boolean(),
  order: z.optional(OrderRecord),
});
export type OrderLookupCompletedV1 = z.output<typeof OrderLookupCompletedV1Payload>;

/** order.lookup.completed v2: when the orders table was read, which the reply's facts date from. */
export const OrderLookupCompletedPayload = z.extend(OrderLookupCompletedV1Payload, {
  looked_up_at: IsoTime,
});
export type OrderLookupCompleted = z.output<typeof OrderLookupCompletedPayload>;

/** What the model must answer for a reply (seed 000 §11.3). */
export const ReplyDraft = z.object({
  reply_text: z.string().check(z.trim(), z.minLength(1), z.maxLength(4000)),
  confidence: z.number().check(z.minimum(0), z.maximum(1)),
  requires_human_review: z.boolean(),
  source_refs: z.array(z.string().check(z.minLength(1), z.maxLength(200))).check(z.maxLength(20)),
});
export type ReplyDraft = z.output<typeof ReplyDraft>;

/**
 * The reply as it may reach the customer: the draft's text after the output guard (a span it
 * withheld replaced), with the guard's verdict and findings (`output_guard`; absent in a reply
 * generated before replies were guarded).
 */
export const ReplyGeneratedPayload = z.extend(ReplyDraft, {
  conversation_id: OpaqueId,
  output_guard: z.optional(OutputGuardRecord),
});
export type ReplyGenerated = z.output<typeof ReplyGeneratedPayload>;

/** A reply held for a person: its text as the output guard left it, and why it is held. */
export const ReplyHeldForReviewPayload = z.object({
  conversation_id: OpaqueId,
  reply_text: ReplyText,
  reason: z.string().check(z.minLength(1), z.maxLength(1000)),
  /** The guard's record of a text no `reply.generated` carries (a model answer that was not valid). */
  output_guard: z.optional(OutputGuardRecord),
});
export type ReplyHeldForReview = z.output<typeof ReplyHeldForReviewPayload>;

export const SendRequestedPayload = z.object({
  conversation_id: OpaqueId,
  customer_id: OpaqueId,
  channel: Channel,
  text: ReplyText,
  /**
   * Which logical send of the task's reply this is (1 for the first reply). The side-effect key
   * is `<task_id>:reply:<logical_attempt>`: every retry of the same send reuses it.
   */
  logical_attempt: z.int().check(z.minimum(1)),
  /**
   * The order facts the reply was written from, as order lookup read them (absent: the reply
   * rests on no order). The sender reads the order again before sending and discards the reply as
   * `invalidated_by_state_change` when any of them changed.
   */
  rests_on: z.optional(
    z.object({
      order_id: OrderId,
      status: z.enum(ORDER_STATUSES),
      refund_status: z.optional(z.enum(REFUND_STATUSES)),
      refund_updated_at: z.optional(IsoTime),
    }),
  ),
});
export type SendRequested = z.output<typeof SendRequestedPayload>;

const Delivery = z.object({
  conversation_id: OpaqueId,
  channel: Channel,
  /** The side-effect key the channel saw. */
  idempotency_key: ReplyKey,
});

export const DeliveredPayload = z.extend(Delivery, {
  /** The channel's id for the delivery. */
  delivery_id: z.string().check(z.minLength(1), z.maxLength(256)),
  /**
   * How the outcome was learnt: from the send call, by querying the channel after a timeout, from
   * the side-effect record, or from an operator who checked an unknown outcome.
   */
  confirmed_by: z.enum(["send", "query", "record", "operator"]),
});
export type Delivered = z.output<typeof DeliveredPayload>;

export const DeliveryFailedPayload = z.extend(Delivery, {
  code: z.string().check(z.minLength(1), z.maxLength(128)),
  message: z.string().check(z.maxLength(4096)),
  /** `failed`: the channel refused; `unknown`: the outcome could not be learnt within the bound. */
  outcome: z.enum(["failed", "unknown"]),
});
export type DeliveryFailed = z.output<typeof DeliveryFailedPayload>;

/**
 * A person's decision on a held reply (unsequenced, aggregate `reply/<task_id>` at version 0,
 * order key = conversation id): approve it, optionally with an edited text, or reject it.
 */
export const ReplyApproveRequestedPayload = z.object({
  conversation_id: OpaqueId,
  /** The text to send instead of the held draft. */
  text: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(4000))),
  ...RequestedByShape,
});
export type ReplyApproveRequested = z.output<typeof ReplyApproveRequestedPayload>;

export const ReplyRejectRequestedPayload = z.object({
  conversation_id: OpaqueId,
  ...RequestedByShape,
});
export type ReplyRejectRequested = z.output<typeof ReplyRejectRequestedPayload>;

export const ReplyApprovedPayload = z.object({
  conversation_id: OpaqueId,
  reply_text: ReplyText,
  /** True when the person changed the held draft's text. */
  edited: z.boolean(),
  /** The logical attempt of the send it asked for (its key `<task_id>:reply:<n>`). */
  logical_attempt: z.int().check(z.minimum(1)),
  ...RequestedByShape,
});
export type ReplyApproved = z.output<typeof ReplyApprovedPayload>;

export const ReplyRejectedPayload = ReplyRejectRequestedPayload;
export type ReplyRejected = z.output<typeof ReplyRejectedPayload>;

export const SEND_RESOLUTIONS = ["delivered", "resend", "abandon"] as const;
export type SendResolution = (typeof SEND_RESOLUTIONS)[number];

/**
 * A person's answer to a send whose outcome stayed unknown (unsequenced, aggregate
 * `delivery/<task_id>` at version 0, order key = conversation id): it was delivered (checked
 * outside AgentBus), send it again under the same key, or give it up.
 */
export const SendResolveRequestedPayload = z.object({
  conversation_id: OpaqueId,
  idempotency_key: ReplyKey,
  resolution: z.enum(SEND_RESOLUTIONS),
  ...RequestedByShape,
});
export type SendResolveRequested = z.output<typeof SendResolveRequestedPayload>;

/**
 * The conversation's types, defined (registered) in the order listed; `./index.ts` calls it once.
 */
export function defineConversationEvents() {
  return [
    ...defineTurnEvents(),
    defineEventType({
      ...streamCommand,
      type: "notification.send.requested",
      description: "Send the reply to the customer (a side effect, done once per idempotency key).",
      payload: SendRequestedPayload,
      personal: ["text"],
    }),
    defineEventType({
      ...streamFact,
      type: "notification.delivered",
      description: "The channel delivered the reply.",
      payload: DeliveredPayload,
    }),
    ...defineReviewEvents(),
    ...defineSupportCancelEvents(),
    defineEventType({
      ...streamFact,
      type: "notification.failed",
      description: "The reply was not delivered, or its outcome stayed unknown past the bound.",
      payload: DeliveryFailedPayload,
    }),
  ] as const;
}

/** A customer's turn: the message, its acceptance, the route, the lookup and the reply. */
function defineTurnEvents() {
  return [
    defineEventType({
      ...streamFact,
      type: "conversation.message.accepted",
      description: "The conversation took the message in; its version went up by one.",
      payload: MessageAcceptedPayload,
      personal: ["text"],
    }),
    defineEventType({
      ...streamFact,
      type: "conversation.sequence.skipped",
      description:
        "The conversation applied a message without the earlier client sequences it waited for in vain.",
      payload: SequenceSkippedPayload,
    }),
    defineEventType({
      ...streamFact,
      type: "support.routed",
      description: "The router chose an intent for the message.",
      payload: RoutedPayload,
    }),
    defineEventType({
      ...streamFact,
      type: "order.lookup.completed",
      description: "The order lookup's result (found or not).",
      payload: OrderLookupCompletedV1Payload,
    }),
    defineEventType({
      ...streamFact,
      schemaVersion: 2,
      type: "order.lookup.completed",
      description: "The order lookup's result (found or not) and when the order was read.",
      payload: OrderLookupCompletedPayload,
      upcast: (previous, envelope) => ({
        ...(previous as OrderLookupCompletedV1),
        looked_up_at: envelope.occurred_at,
      }),
    }),
    defineEventType({
      ...streamFact,
      type: "reply.generated",
      description: "A reply draft was generated and validated.",
      payload: ReplyGeneratedPayload,
      personal: ["reply_text"],
    }),
    defineEventType({
      ...streamFact,
      type: "reply.held_for_review",
      description: "The reply needs a person's review before it may be sent.",
      payload: ReplyHeldForReviewPayload,
      personal: ["reply_text"],
    }),
  ] as const;
}

/** What a person decides about held replies and unknown send outcomes (seed 000 §14). */
function defineReviewEvents() {
  return [
    defineEventType({
      ...outsideCommand,
      type: "reply.approve.requested",
      description:
        "Send a held reply, optionally with an edited text (sent by an operator; aggregate reply/<task_id>, version 0).",
      payload: ReplyApproveRequestedPayload,
      personal: ["text", "reason"],
    }),
    defineEventType({
      ...outsideCommand,
      type: "reply.reject.requested",
      description:
        "Drop a held reply: nothing is sent (sent by an operator; aggregate reply/<task_id>, version 0).",
      payload: ReplyRejectRequestedPayload,
      personal: ["reason"],
    }),
    defineEventType({
      ...streamFact,
      type: "reply.approved",
      description:
        "A person approved the held reply; its send was asked for under a key of its own.",
      payload: ReplyApprovedPayload,
      personal: ["reply_text", "reason"],
    }),
    defineEventType({
      ...streamFact,
      type: "reply.rejected",
      description: "A person rejected the held reply; nothing is sent for it.",
      payload: ReplyRejectedPayload,
      personal: ["reason"],
    }),
    defineEventType({
      ...outsideCommand,
      type: "notification.resolve.requested",
      description:
        "Resolve a send whose outcome is unknown as delivered, resend (same key) or abandon (sent by an operator; aggregate delivery/<task_id>, version 0).",
      payload: SendResolveRequestedPayload,
    }),
  ] as const;
}
