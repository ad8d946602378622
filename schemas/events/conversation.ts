import { OpaqueId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { outsideFact } from "./kinds";

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

export const MessageReceivedPayload = z.object({
  text: MessageText,
  customer_id: OpaqueId,
  /** Where the reply goes back to. @default "chat" */
  channel: z._default(Channel, "chat"),
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
  ] as const;
}
