import * as z from "../../../schemas/zod";

/**
 * The refund agent's first user message: the order in question and what the customer wrote, as
 * JSON. The run keeps it as the first message of its stored conversation, so what the customer
 * wrote is read back from there (`customerMessagesOf`) rather than from the conversation again.
 */
export function refundPrompt(orderId: string, customerMessages: readonly string[]): string {
  return JSON.stringify({
    refund_question: { order_id: orderId, customer_messages: customerMessages },
  });
}

/** A run's first message as stored: `{ role, text }` with the refund question as its text. */
const StoredQuestion = z.jsonText(
  z.object({
    text: z.jsonText(
      z.object({ refund_question: z.object({ customer_messages: z.array(z.string()) }) }),
      "a refund question",
    ),
  }),
  "a stored message",
);

/**
 * What the customer wrote, from the stored text of a run's first message; none when it is not a
 * refund question (a customer's erasure overwrote it).
 */
export function customerMessagesOf(firstMessage: string | undefined): string[] {
  const parsed = StoredQuestion.safeParse(firstMessage);
  return parsed.success ? parsed.data.text.refund_question.customer_messages : [];
}
