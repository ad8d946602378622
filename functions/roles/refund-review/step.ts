import * as z from "../../../schemas/zod";
import type { StepHandler } from "../../kit";
import { OpaqueId, PermanentError } from "../../kit";
import { OrderId } from "../customer-support/events/index";
import type { OrdersPort } from "../customer-support/integrations/orders/port";
import type { PaymentsPort } from "../customer-support/integrations/payments/port";
import { REFUNDABLE_FROM, refundOnRecord } from "./tools";

/**
 * The refund agent as a workflow step: a review of one refund request, by the rules its refund
 * tool holds to, answering a decision. A step reviews and refunds nothing: a refund is made on
 * the conversation path (where a person approves what is above the threshold and the customer is
 * told), never from a node a re-run may repeat.
 *
 * - input: the order, its customer (an order that is not theirs is not found, as for the tools),
 *   the amount asked for (the order's total when left out) and why;
 * - output: `approve`, `refuse` or `needs_person` (above `approvalAboveCents`), with the reason,
 *   the order's status and the amount reviewed; `already_refunded` when the order's record or
 *   the payment system shows a refund.
 */

export const RefundReviewStepInput = z.looseObject({
  order_id: OrderId,
  customer_id: OpaqueId,
  amount_cents: z.optional(z.int().check(z.positive())),
  reason: z.string().check(z.minLength(1), z.maxLength(2000)),
});
export type RefundReviewStepInput = z.output<typeof RefundReviewStepInput>;

export const RefundReviewStepOutput = z.object({
  decision: z.enum(["approve", "refuse", "needs_person", "already_refunded"]),
  reason: z.string().check(z.minLength(1), z.maxLength(2000)),
  order_status: z.string(),
  amount_cents: z.int().check(z.nonnegative()),
});
export type RefundReviewStepOutput = z.output<typeof RefundReviewStepOutput>;

export interface RefundStepPorts {
  readonly orders: Pick<OrdersPort, "get">;
  readonly payments: Pick<PaymentsPort, "refundOf">;
}

/** The review of one refund request (see the module comment). */
export function refundReviewStep(
  ports: RefundStepPorts,
  { approvalAboveCents }: { readonly approvalAboveCents: number },
): StepHandler {
  return async (input: RefundReviewStepInput): Promise<RefundReviewStepOutput> => {
    const order = await ports.orders.get(input.order_id);
    if (!order || order.customer_id !== input.customer_id)
      throw new PermanentError(
        "refund.order_not_found",
        `customer ${input.customer_id} has no order ${input.order_id}`,
      );
    const amount = input.amount_cents ?? order.total_cents;
    const answer = (decision: RefundReviewStepOutput["decision"], reason: string) => ({
      decision,
      reason,
      order_status: order.status,
      amount_cents: amount,
    });
    if (refundOnRecord(order) || (await ports.payments.refundOf(order.order_id)))
      return answer("already_refunded", `order ${order.order_id} was refunded already`);
    if (amount > order.total_cents)
      return answer(
        "refuse",
        `${amount} cents is more than the order's total of ${order.total_cents}`,
      );
    if (!(REFUNDABLE_FROM as readonly string[]).includes(order.status))
      return answer("refuse", `an order that is ${order.status} is not refunded`);
    if (amount > approvalAboveCents)
      return answer(
        "needs_person",
        `${amount} cents is above ${approvalAboveCents}: a person decides`,
      );
    return answer("approve", `order ${order.order_id} is ${order.status} and refundable`);
  };
}
