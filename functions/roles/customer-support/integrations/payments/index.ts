import { defineIntegration } from "../../../../kit";
import { LocalPayments } from "./memory";
import type { PaymentsPort } from "./port";

export type { PaymentsPort };

/**
 * The payment system the refund agent pays through (./port.ts): refunds under idempotency keys, a
 * query by key after an unclear outcome. On AWS a stand-in over a DynamoDB table (./infra.ts) that
 * applies each key once, as a provider's idempotency keys do; a team replaces its adapter
 * (./aws.ts) with one for its provider. Its twin is LocalPayments, with the same error contract
 * and injectable faults.
 */
export const payments = /* @__PURE__ */ defineIntegration<PaymentsPort>({
  name: "payments",
  access: "write",
  does: "pays refunds",
  defaults: undefined,
  memory: () => new LocalPayments(),
  notes:
    "A refund whose outcome stays unknown waits for `agentbus resolve <run> --as applied|not_applied`; the payment stand-in's table is output PaymentsTableName.",
});
