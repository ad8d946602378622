import { describe, expect, it } from "vitest";
import type { ConversationTurn } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { renderConversation } from "../../lib/dev/local/conversation";
import { customerMessage } from "../../lib/dev/local/scenario/customer-support";

/**
 * How npm start prints a support conversation (renderConversation): what the view knows of each
 * turn's order, and no more. A refund question's order is looked up by the refund agent, not by
 * order lookup, so its turn has an order id and no `order_found`: it printed "order 123 not found"
 * just above a reply that described order 123.
 */

const conversationId = "conv_01KB0R7Q2M5N8P1R4T6V9X2Z3B";
const message = customerMessage(
  conversationId,
  "cust_alice",
  "Has the refund for order 123 gone through?",
);
const reply = "Order 123 (Wireless earbuds) is returned. Your refund of 49.99 USD was submitted.";

function rendered(turn: Partial<ConversationTurn>): string {
  return renderConversation(
    {
      label: "refund",
      conversationId,
      customerId: "cust_alice",
      messages: [message],
      view: {
        conversation_id: conversationId,
        version: 1,
        turn_order: [message.task_id],
        turns: {
          [message.task_id]: { task_id: message.task_id, status: "delivered", ...turn },
        },
      },
    },
    [],
  );
}

describe("renderConversation", () => {
  it("says nothing of a lookup that order lookup did not make", () => {
    const text = rendered({ intent: "refund", order_id: "123", reply_text: reply });
    expect(text).toContain("intent refund, order 123, status delivered");
    expect(text).not.toContain("not found");
  });

  it("says whether order lookup found the order when it looked", () => {
    const of = (found: boolean) =>
      rendered({ intent: "order_status", order_id: "123", order_found: found });
    expect(of(true)).toContain("order 123 found,");
    expect(of(false)).toContain("order 123 not found,");
  });
});
