import type {
  LocalPayments,
  PaymentFault,
} from "../../../functions/roles/customer-support/integrations/payments/memory";
import type {
  PaymentsPort,
  RefundQueryAnswer,
  RefundReceipt,
  RefundRequest,
} from "../../../functions/roles/customer-support/integrations/payments/port";
import type { CallFault } from "./kinds";

/**
 * What each call fault is at the payment stand-in, in LocalPayments' own fault kinds: refused
 * before it applied (throttled), a timeout before it applied, or a timeout after it did (the agent
 * cannot know it did).
 */
const PAYMENT_FAULT: Readonly<Record<CallFault, PaymentFault>> = {
  throttle: "throttled",
  "server-error": "throttled",
  "timeout-after-apply": "timeout_after",
  "connection-reset": "timeout_before",
};

/**
 * The payment stand-in under faults, as both chaos runs give it to the refund agent: the
 * LocalPayments (refunds kept by key and counted per order) with each refund's fault armed
 * through its own fault injection, so an injected failure is the error a provider answers.
 */
export class FaultyPayments implements PaymentsPort {
  readonly name: string;

  constructor(
    readonly inner: LocalPayments,
    private readonly refundFault: (request: RefundRequest) => CallFault | undefined,
  ) {
    this.name = inner.name;
  }

  async refund(request: RefundRequest): Promise<RefundReceipt> {
    const fault = this.refundFault(request);
    if (fault) this.inner.failNext(PAYMENT_FAULT[fault]);
    return this.inner.refund(request);
  }

  query(key: string): Promise<RefundQueryAnswer> {
    return this.inner.query(key);
  }

  refundOf(orderId: string): Promise<RefundReceipt | undefined> {
    return this.inner.refundOf(orderId);
  }
}

/**
 * A defect to plant in the refund path: every refund goes out under a key of its own, and the
 * adapter finds no order's refund (the retry's query by the real key then finds nothing, the
 * order's refund is not seen either, and the refund is made again).
 */
export function withNewRefundKeyPerRetry(payments: PaymentsPort): PaymentsPort {
  let attempts = 0;
  return {
    name: payments.name,
    refund: (request) => payments.refund({ ...request, key: `${request.key}#${attempts++}` }),
    query: (key) => payments.query(key),
    refundOf: async () => undefined,
  };
}
