import { ordersInfra } from "../../functions/roles/customer-support/integrations/orders/infra";
import { paymentsInfra } from "../../functions/roles/customer-support/integrations/payments/infra";
import { replyChannelInfra } from "../../functions/roles/customer-support/integrations/reply-channel/infra";
import type { AnyIntegrationInfra } from "./integration-infra";

/**
 * The infrastructure of the reference applications' integrations (the customer-support
 * application's orders, payment stand-in and reply channel): what the project's stack is given
 * beside the hub's own, as a team's stack is given its own.
 */
export const PROJECT_INTEGRATIONS: readonly AnyIntegrationInfra[] = [
  ordersInfra,
  paymentsInfra,
  replyChannelInfra,
];
