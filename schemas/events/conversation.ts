import { IsoTime } from "../envelope";
import { OpaqueId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { outsideCommand, outsideFact } from "./kinds";

/**
 * The conversation's ingress: what a client puts on the bus for a customer's message, the front
 * door's contract (functions/front-door: `POST /v1/conversations/{id}/messages` posts it; the AWS
 * CLI may put it too). Unsequenced, version 0, aggregate `conversation/<conversation_id>`, order key
 * the conversation id, a new `task_id` per message. What becomes of a message is the application's
 * that subscribes to it: the reference customer-support application's conversation group
 * (functions/roles/customer-support/events/) accepts it on the conversation's stream.
 */

export const MessageText = z.string().check(z.trim(), z.minLength(1), z.maxLength(4000));

/** The channel a reply goes back to the customer on. */
export const Channel = z.string().check(z.regex(/^[a-z][a-z0-9-]{0,31}$/));

/**
 * A message's place in its conversation as the client sent it (1, 2, 3, ...): the conversation
 * applies a conversation's messages in this order, whatever order they reach it in. The front door
 * takes it from the client or assigns the next one in arrival order.
 */
export const ClientSeq = z.int().check(z.minimum(1), z.maximum(2_147_483_647));

export const MessageReceivedPayload = z.object({
  text: MessageText,
  customer_id: OpaqueId,
  /** Where the reply goes back to. @default "chat" */
  channel: z._default(Channel, "chat"),
  /** The message's client sequence in its conversation; absent: applied as it arrives. */
  client_seq: z.optional(ClientSeq),
});

/** The aggregate a conversation's messages are sent on (`conversation/<conversation_id>`). */
export const CONVERSATION_AGGREGATE = "conversation";

/**
 * The sweeper's nudge to a conversation that holds messages sent after one it has not received:
 * their wait is due (`due_at`), so the conversation applies them, recording the sequences it
 * skipped.
 */
export const HoldExpiredPayload = z.object({
  conversation_id: OpaqueId,
  due_at: IsoTime,
});
export type MessageReceived = z.output<typeof MessageReceivedPayload>;

export function defineConversationEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideFact,
      type: "conversation.message.received",
      description:
        "A customer sent a message (sent by a client: aggregate conversation/<conversation_id>, version 0).",
      payload: MessageReceivedPayload,
      personal: ["text"],
    }),
    registry.define({
      ...outsideCommand,
      type: "conversation.hold.expired",
      description:
        "The sweeper: a conversation's messages held for an earlier client sequence waited their bound (aggregate conversation/<conversation_id>, version 0).",
      payload: HoldExpiredPayload,
    }),
  ] as const;
}
