import { defineModule, handlerBeside } from "../../../kit";
import { SUPPORT_EVENT_TYPES } from "../events/index";
import { orders } from "../integrations/orders";
import { STEP_FAILED_ATTENTION } from "../step-failure";
import { TENANT_FAIR_CONCURRENCY } from "../tenant-fairness";
import { ORDER_LOOKUP, orderLookupRole } from "./order-lookup";

/** The order lookup: reads the order a turn asks about from the orders table. */
export const orderLookupModule = defineModule({
  descriptor: ORDER_LOOKUP,
  entry: handlerBeside(import.meta.url),
  events: SUPPORT_EVENT_TYPES,
  deployment: {
    ...TENANT_FAIR_CONCURRENCY,
    delivery: "relay",
    attention: [STEP_FAILED_ATTENTION],
  },
  uses: { orders },
  build: (ports) => orderLookupRole({ orders: ports.orders }),
});
