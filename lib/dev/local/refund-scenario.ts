import { ulid } from "ulid";
import { DynamoOrders } from "../../../functions/roles/customer-support/integrations/orders/dynamodb";
import { DynamoPaymentsStandIn } from "../../../functions/roles/customer-support/integrations/payments/dynamodb-stand-in";
import type { Envelope } from "../../../schemas";
import { fromSdk } from "../../operator/from-sdk";
import type { LocalEnvironment } from "./environment";
import { putOnBus } from "./put-on-bus";
import { type Check, check } from "./scenario/check";
import {
  type ConversationCase,
  customerMessage,
  loadConversation,
  waitUntil,
} from "./scenario/customer-support";

/**
 * The refund inquiry of seed 000 §10 on the local stack: bob asks for a refund of order 456
 * (delivered, 34.50 USD); the router sends the question to the refund agent, which looks the
 * order and its refund up, cancels the order and refunds it once at the payment stand-in (the
 * stack's own table), and reply generation and the sender tell him.
 */
export interface RefundCase {
  readonly conversation: ConversationCase;
  readonly message: Envelope;
}

export async function runRefund(
  env: LocalEnvironment,
  log: (line: string) => void,
): Promise<RefundCase> {
  log("support: bob asks for a refund of order 456; the refund agent cancels it and refunds it");
  const conversation: ConversationCase = {
    label: "refund",
    conversationId: `conv_${ulid()}`,
    customerId: "cust_bob",
    messages: [],
  };
  const message = customerMessage(
    conversation.conversationId,
    conversation.customerId,
    "Please refund order 456, the parcel came damaged.",
  );
  (conversation.messages as Envelope[]).push(message);
  await putOnBus(env, "events", [message]);
  conversation.view = await waitUntil("bob's refund reply", async () => {
    const view = await loadConversation(env, conversation.conversationId);
    return view?.turns[message.task_id]?.status === "delivered" ? view : undefined;
  });
  return { conversation, message };
}

export async function refundCheck(
  env: LocalEnvironment,
  { conversation }: RefundCase,
): Promise<Check> {
  const client = fromSdk(env.clients.dynamodb);
  const { orders, payments } = env.names.tables;
  const refunds = payments
    ? await new DynamoPaymentsStandIn({ client, tableName: payments }).refundCount("456")
    : 0;
  const order = orders
    ? await new DynamoOrders(client, orders, { consistentRead: true }).get("456")
    : undefined;
  const replies = env.channel
    .deliveries()
    .filter((d) => d.conversationId === conversation.conversationId);
  return check(
    "refund: order 456 cancelled and refunded once, the customer told",
    refunds === 1 &&
      order?.status === "cancelled" &&
      replies.length === 1 &&
      (replies[0]?.text.includes("Your refund has been issued.") ?? false),
    `${refunds} refund(s), order ${order?.status ?? "?"}, ${replies.length} reply: ${replies[0]?.text.slice(0, 80) ?? "none"}`,
  );
}
