import * as z from "../../../schemas/zod";
import { defineTool, PermanentError, ToolRejectedError } from "../../kit";
import { OrderId, OrderRecord } from "../customer-support/events/conversation";
import type { OrdersPort } from "../customer-support/integrations/orders/port";
import type { PaymentsPort } from "../customer-support/integrations/payments/port";

/**
 * The refund agent's tools: `get_order` and `get_refund_status` read; `issue_refund` writes, under
 * its call's idempotency key, with a person's approval above an amount. Each sees only the orders
 * of the run's customer (its subject's `customer_id`): another customer's order is not found, as
 * for order lookup, whatever id the model asks for. `issue_refund` acts only on the order the
 * review is about (its subject's `order_id`, `actsOn`): a call for any other order, even the
 * customer's own, is refused before anything runs. An order is refunded once, whoever refunded
 * it: not when its record shows a refund (`submitted`, `refunded`) or the payment system has one.
 *
 * refunded ⇒ cancelled (seed 000 §6.2) holds at every moment: `issue_refund` first cancels the
 * order in the orders table with one conditional write (only from a status a refund may follow,
 * and only when no other refund key has claimed the order: the write records its key), and asks
 * the payment system for the refund only once that write succeeded, under the same key. A refund
 * therefore never exists for an order that is not cancelled, and two reviews of one order (two
 * turns asking at once) cannot both refund it; a refund that then fails leaves a cancelled order
 * without one, which the invariant allows (the model is told, and says so).
 */

/** Statuses an order may be refunded from (an order in transit is not). */
export const REFUNDABLE_FROM = ["placed", "delivered", "returned", "cancelled"] as const;

/** The refund statuses of an order's record that say it was refunded (or is being). */
export const REFUNDED = ["submitted", "refunded"] as const;

/** Whether the order's record shows a refund made, by whoever made it (the shop, a person). */
export function refundOnRecord(order: OrderRecord): boolean {
  return (REFUNDED as readonly string[]).includes(order.refund?.status ?? "none");
}

/**
 * An order is refunded once, whoever refunded it: one whose record shows a refund, or that the
 * payment system has refunded under another key, is not refunded again.
 */
async function refuseRefundedOrder(order: OrderRecord, payments: PaymentsPort): Promise<void> {
  if (refundOnRecord(order))
    throw new ToolRejectedError(
      "refund.already_refunded",
      `order ${order.order_id}'s refund is ${order.refund?.status}: it is not refunded again`,
    );
  const made = await payments.refundOf(order.order_id);
  if (made)
    throw new ToolRejectedError(
      "refund.already_refunded",
      `the payment system has refunded order ${order.order_id} (${made.refund_id}): it is not refunded again`,
    );
}

const OrderInput = z.object({ order_id: OrderId });

/** The order, when it is the run's customer's; undefined otherwise (or when there is none). */
async function customersOrder(
  orders: OrdersPort,
  orderId: string,
  subject: Readonly<Record<string, string>>,
): Promise<OrderRecord | undefined> {
  const order = await orders.get(orderId);
  return order !== undefined && order.customer_id === subject.customer_id ? order : undefined;
}

export function getOrderTool(orders: OrdersPort) {
  return defineTool({
    name: "get_order",
    description: "Look up an order by its id: its status, item, total and refund, if any.",
    effect: "read",
    input: OrderInput,
    output: z.union([
      z.object({ found: z.literal(true), order: OrderRecord }),
      z.object({ found: z.literal(false) }),
    ]),
    async run({ order_id }, { subject }) {
      const order = await customersOrder(orders, order_id, subject);
      return order ? { found: true as const, order } : { found: false as const };
    },
  });
}

const Receipt = z.object({
  refund_id: z.string(),
  order_id: OrderId,
  amount_cents: z.int().check(z.nonnegative()),
});

export function getRefundStatusTool(orders: OrdersPort, payments: PaymentsPort) {
  return defineTool({
    name: "get_refund_status",
    description: "Whether the payment system has refunded an order, and how much.",
    effect: "read",
    input: OrderInput,
    output: z.object({ refunded: z.boolean(), refund: z.optional(Receipt) }),
    async run({ order_id }, { subject }) {
      if (!(await customersOrder(orders, order_id, subject))) return { refunded: false };
      const refund = await payments.refundOf(order_id);
      return refund ? { refunded: true, refund } : { refunded: false };
    },
  });
}

const IssueRefundInput = z.object({
  order_id: OrderId,
  amount_cents: z.int().check(z.positive(), z.lte(100_000_000)),
  reason: z.string().check(z.minLength(1), z.maxLength(500)),
});

/** Each tool's input, by tool name: what the model is shown (the module's modelSchemas). */
export const REFUND_TOOL_INPUTS = {
  get_order: OrderInput,
  get_refund_status: OrderInput,
  issue_refund: IssueRefundInput,
};

export interface IssueRefundOptions {
  /** Refunds above this many cents wait for a person's approval. */
  readonly approvalAboveCents: number;
  readonly approvalDeadlineSeconds: number;
}

/** The refund agent's one write tool. */
export const ISSUE_REFUND = "issue_refund";

export function issueRefundTool(
  orders: OrdersPort,
  payments: PaymentsPort,
  options: IssueRefundOptions,
) {
  return defineTool({
    name: ISSUE_REFUND,
    description:
      "Refund an order at the payment system (cancelling the order first). Use once per order, only when the customer is owed the refund.",
    effect: "write",
    input: IssueRefundInput,
    output: Receipt,
    approval: {
      required: ({ amount_cents }) => amount_cents > options.approvalAboveCents,
      deadlineSeconds: options.approvalDeadlineSeconds,
      onDeadline: "reject",
    },
    // The review's own order, whatever order the model names.
    actsOn: ["order_id"],
    async run({ order_id, amount_cents }, { key, subject }) {
      const order = await customersOrder(orders, order_id, subject);
      if (!order) throw new ToolRejectedError("refund.no_order", `there is no order ${order_id}`);
      await refuseRefundedOrder(order, payments);
      if (amount_cents > order.total_cents)
        throw new ToolRejectedError(
          "refund.over_total",
          `order ${order_id} totals ${order.total_cents} cents; ${amount_cents} cannot be refunded`,
        );
      if (!orders.cancelForRefund)
        throw new PermanentError(
          "refund.orders_read_only",
          'the orders port cannot cancel an order, so no refund is made (wire orders with needs.orders: "cancel")',
        );
      const cancelled = await orders.cancelForRefund(order_id, key, REFUNDABLE_FROM);
      if (!cancelled.cancelled && cancelled.status === "claimed")
        throw new ToolRejectedError(
          "refund.already_claimed",
          `order ${order_id} is being refunded, or was, under another request: it is not refunded twice`,
        );
      if (!cancelled.cancelled)
        throw new ToolRejectedError(
          "refund.not_cancellable",
          `order ${order_id} is ${cancelled.status}: it cannot be cancelled, so it is not refunded`,
        );
      return payments.refund({ key, order_id, amount_cents });
    },
    async query(_input, { key }) {
      const answer = await payments.query(key);
      return answer.status === "applied" ? { status: "applied", output: answer.receipt } : answer;
    },
  });
}
