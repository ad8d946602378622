import { ordersInfra } from "../../functions/roles/customer-support/integrations/orders/infra";
import { paymentsInfra } from "../../functions/roles/customer-support/integrations/payments/infra";
import { replyChannelInfra } from "../../functions/roles/customer-support/integrations/reply-channel/infra";
import { ROLE_MODULES } from "../../functions/roles/modules";
import type { AgentBusStackProps } from "./agentbus-stack";
import type { AnyIntegrationInfra } from "./integration-infra";
import { defineTopology, groupOf } from "./topology";

/**
 * The reference stack (`bin/agentbus.ts`, `npm start`, the tests): one use of the AgentBus stack,
 * as a team's own stack is. Its topology is the three topics and one group per role module of
 * functions/roles/modules.ts (to add an agent role here, add its module there); its integrations
 * are the reference applications' (the customer-support application's orders, payment stand-in
 * and reply channel) beside the hub's own, which every stack has.
 */
export const topology = defineTopology({
  topics: ["commands", "events", "audit"],
  groups: ROLE_MODULES.map(groupOf),
});

/** The infrastructure of the reference applications' integrations. */
export const PROJECT_INTEGRATIONS: readonly AnyIntegrationInfra[] = [
  ordersInfra,
  paymentsInfra,
  replyChannelInfra,
];

/** What the reference stack is built from: its topology and its integrations. */
export const PROJECT_STACK = {
  topology,
  integrations: PROJECT_INTEGRATIONS,
} as const satisfies Pick<AgentBusStackProps, "topology" | "integrations">;
