import * as z from "../../../../schemas/zod";
import { defineEventType, type Envelope, streamCommand } from "../../../kit";
import { ConversationTurn, Intent, OrderId, OrderRecord } from "./conversation";

/**
 * The commands of the support chain (seed 000 §11): route, order lookup, reply generation.
 *
 * Version 2 carries no customer text (seed 000 §4.3): the customer's messages are kept once, in
 * the conversation's state, and a command names the context it works on instead
 * (`context_version`: the conversation's messages through that version). The router and reply
 * generation read that context from the conversation's state. Version 1 copied the message's
 * text into every command; a stored or in-flight v1 command is read as v2 (the text dropped, the
 * context named by its `input_version`).
 */

/** What every support command carries: who, where the reply goes, and which context. */
export const SupportTurn = z.extend(z.omit(ConversationTurn, { text: true }), {
  /** The conversation version of this turn: its context is the messages through it. */
  context_version: z.int().check(z.minimum(1)),
});

export const RouteRequestedPayload = SupportTurn;
export type RouteRequested = z.output<typeof RouteRequestedPayload>;

export const OrderLookupRequestedPayload = z.extend(SupportTurn, {
  intent: Intent,
  order_id: OrderId,
});
export type OrderLookupRequested = z.output<typeof OrderLookupRequestedPayload>;

/** What the refund agent decided on a refund question (functions/roles/refund-review/events.ts). */
export const RefundReviewOutcome = z.object({
  /** `answered`: a question about a refund that exists; nothing was refunded or refused. */
  decision: z.enum(["approved", "rejected", "answered"]),
  /** What the customer is told, in a sentence or two. */
  reason: z.string().check(z.minLength(1), z.maxLength(2000)),
  amount_cents: z.optional(z.int().check(z.nonnegative())),
  refund_id: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
});
export type RefundReviewOutcome = z.output<typeof RefundReviewOutcome>;

export const ReplyGenerationRequestedPayload = z.extend(SupportTurn, {
  intent: Intent,
  order_id: z.optional(OrderId),
  /** The looked-up order; absent when none was asked for or none was found. */
  order: z.optional(OrderRecord),
  /** For a refund question: what the refund agent decided (the reply tells the customer). */
  refund_review: z.optional(RefundReviewOutcome),
  /**
   * Hold the reply for a person's review for this reason, whatever the draft: the output guard
   * refused the refund agent's reason (`refund_review.reason` then carries what it withheld).
   */
  hold_reason: z.optional(z.string().check(z.minLength(1), z.maxLength(1000))),
});
export type ReplyGenerationRequested = z.output<typeof ReplyGenerationRequestedPayload>;

/** A v1 command's payload as v2: the copied text dropped, the context its input version. */
function withoutText(previous: unknown, envelope: Envelope) {
  const { text: _text, ...rest } = previous as { text?: string } & Record<string, unknown>;
  return { ...rest, context_version: envelope.input_version ?? 1 };
}

export function defineSupportCommands() {
  return [
    ...defineCommand({
      type: "support.route.requested",
      description: "Decide what the customer's message is about.",
      v1: ConversationTurn,
      v2: RouteRequestedPayload,
    }),
    ...defineCommand({
      type: "order.lookup.requested",
      description: "Look up the order the customer asks about.",
      v1: z.extend(ConversationTurn, { intent: Intent, order_id: OrderId }),
      v2: OrderLookupRequestedPayload,
    }),
    ...defineCommand({
      type: "reply.generation.requested",
      description: "Generate a reply to the customer's message from the facts gathered.",
      v1: z.extend(ConversationTurn, {
        intent: Intent,
        order_id: z.optional(OrderId),
        order: z.optional(OrderRecord),
      }),
      v2: ReplyGenerationRequestedPayload,
    }),
  ] as const;
}

/** Both versions of one command (generic, so each command keeps its own name and payloads). */
function defineCommand<T extends string, V1 extends z.ZodMiniType, V2 extends z.ZodMiniType>({
  type,
  description,
  v1,
  v2,
}: {
  type: T;
  description: string;
  v1: V1;
  v2: V2;
}) {
  return [
    defineEventType({ ...streamCommand, type, description, payload: v1 }),
    defineEventType({
      ...streamCommand,
      type,
      schemaVersion: 2,
      description: `${description} Carries no customer text: the context is the conversation's messages through context_version.`,
      payload: v2,
      upcast: withoutText as (previous: unknown, envelope: Envelope) => z.input<V2>,
    }),
  ] as const;
}
