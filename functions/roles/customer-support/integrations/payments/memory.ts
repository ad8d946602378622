import { ToolRejectedError, ToolTimeoutError, TransientError } from "../../../../kit";
import type { PaymentsPort, RefundQueryAnswer, RefundReceipt, RefundRequest } from "./port";

/**
 * NOT a payment system. A stand-in for the PaymentsPort, for the local runtime, the simulation and
 * tests: it applies each idempotency key at most once (a second refund under a key answers the
 * first's receipt) and, like a provider, refunds an order again under another key (one refund per
 * order is the agent's part: `refundsByOrder` shows a defect), as the DynamoDB stand-in does
 * (functions/adapters/dynamodb/payments-stand-in.ts). It keeps every refund it made, and fails on
 * request, the ways a real one does:
 *
 * - `rejected`: refuses (ToolRejectedError `payment.declined`), nothing applied;
 * - `throttled`: TransientError `payment.throttled` with `retryAfterSeconds`, nothing applied;
 * - `timeout_before`: times out before applying (ToolTimeoutError; a query finds nothing);
 * - `timeout_after`: applies, then times out (ToolTimeoutError; a query finds the refund);
 * - `query_unknown`: the next query cannot tell (`unknown`).
 */
export type PaymentFault =
  | "rejected"
  | "throttled"
  | "timeout_before"
  | "timeout_after"
  | "query_unknown";

export class LocalPayments implements PaymentsPort {
  readonly name = "local-payments";
  /** Every refund applied, by key, in the order made. */
  readonly refunds = new Map<string, RefundReceipt>();
  /** Every refund call (applied or not). */
  calls = 0;
  private readonly faults: PaymentFault[] = [];
  private sequence = 0;

  /** Make the next call(s) fail this way, in order. */
  failNext(...faults: PaymentFault[]): void {
    this.faults.push(...faults);
  }

  async refund(request: RefundRequest): Promise<RefundReceipt> {
    this.calls += 1;
    const fault = this.take(["rejected", "throttled", "timeout_before", "timeout_after"]);
    if (fault === "rejected")
      throw new ToolRejectedError(
        "payment.declined",
        `refund of order ${request.order_id} declined`,
      );
    if (fault === "throttled")
      throw new TransientError("payment.throttled", "too many requests", {
        details: { retryAfterSeconds: 2 },
      });
    if (fault === "timeout_before")
      throw new ToolTimeoutError(`no answer for refund key ${request.key}`);
    const receipt = this.apply(request);
    if (fault === "timeout_after")
      throw new ToolTimeoutError(`no answer for refund key ${request.key}`);
    return receipt;
  }

  async query(key: string): Promise<RefundQueryAnswer> {
    if (this.take(["query_unknown"])) return { status: "unknown" };
    const receipt = this.refunds.get(key);
    return receipt ? { status: "applied", receipt } : { status: "not_applied" };
  }

  /** The order's latest refund. */
  async refundOf(orderId: string): Promise<RefundReceipt | undefined> {
    return [...this.refunds.values()].findLast((r) => r.order_id === orderId);
  }

  /** Refunds per order (more than one is a double refund). */
  refundsByOrder(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const r of this.refunds.values())
      counts.set(r.order_id, (counts.get(r.order_id) ?? 0) + 1);
    return counts;
  }

  private apply(request: RefundRequest): RefundReceipt {
    const existing = this.refunds.get(request.key);
    if (existing) return existing;
    this.sequence += 1;
    const receipt = {
      refund_id: `refund_${String(this.sequence).padStart(6, "0")}`,
      order_id: request.order_id,
      amount_cents: request.amount_cents,
    };
    this.refunds.set(request.key, receipt);
    return receipt;
  }

  private take(kinds: readonly PaymentFault[]): PaymentFault | undefined {
    const next = this.faults[0];
    if (next === undefined || !kinds.includes(next)) return undefined;
    this.faults.shift();
    return next;
  }
}
