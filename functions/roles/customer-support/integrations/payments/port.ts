/**
 * The payment system as the refund agent sees it: refunds by idempotency key (a key is applied at
 * most once, as payment providers' idempotency keys are), a query by key after an unclear outcome,
 * and an order's refund. Errors follow the tool contract (functions/core/agent/tool.ts):
 * ToolTimeoutError when the outcome is unclear, ToolRejectedError for a refusal, TransientError
 * when nothing happened. Its twin is ./memory.ts; on AWS, the stand-in of ./dynamodb-stand-in.ts.
 */
export interface PaymentsPort {
  readonly name: string;
  refund(request: RefundRequest): Promise<RefundReceipt>;
  query(key: string): Promise<RefundQueryAnswer>;
  /** The order's refund at the payment system, if one was made. */
  refundOf(orderId: string): Promise<RefundReceipt | undefined>;
}

export interface RefundRequest {
  readonly key: string;
  readonly order_id: string;
  readonly amount_cents: number;
}

export interface RefundReceipt {
  readonly refund_id: string;
  readonly order_id: string;
  readonly amount_cents: number;
}

export type RefundQueryAnswer =
  | { readonly status: "applied"; readonly receipt: RefundReceipt }
  | { readonly status: "not_applied" }
  | { readonly status: "unknown" };
