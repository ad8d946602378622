import { defineIntegration } from "../../../../kit";
import { ordersFrom } from "./memory";
import type { OrdersPort } from "./port";
import { SAMPLE_ORDERS } from "./sample-orders";

export type { OrdersPort };

/** How a role uses the orders: `cancel` lets it cancel an order for a refund. */
export interface OrdersUse {
  readonly cancel: boolean;
}

/**
 * The shop's orders, as the support conversation and the refund agent read them (./port.ts). On
 * AWS a DynamoDB table the stack provisions (./infra.ts), where a real deployment mirrors its
 * order data; its twin holds the sample orders (./sample-orders.ts). Reads only, unless a role
 * uses it with `cancel` (a conditional write). A role that reads orders records what it read, so
 * it is still a fold of its streams.
 */
export const orders = /* @__PURE__ */ defineIntegration<OrdersPort, OrdersUse>({
  name: "orders",
  access: "read",
  does: "reads orders",
  folds: true,
  defaults: { cancel: false },
  memory: () => ordersFrom(SAMPLE_ORDERS),
  notes:
    "The orders table (output OrdersTableName) is seeded by the local stack with the sample orders; a real deployment mirrors the shop's orders into it.",
});
