import { ordersInfra } from "../../functions/roles/customer-support/integrations/orders/infra";
import { paymentsInfra } from "../../functions/roles/customer-support/integrations/payments/infra";
import { replyChannelInfra } from "../../functions/roles/customer-support/integrations/reply-channel/infra";
import { REFERENCE_WORKFLOWS, ROLE_MODULES } from "../../functions/roles/modules";
import { type AgentBusApp, topologyOf } from "./agentbus";
import type { AnyIntegrationInfra } from "./integration-infra";

/** The infrastructure of the reference applications' integrations. */
export const PROJECT_INTEGRATIONS: readonly AnyIntegrationInfra[] = [
  ordersInfra,
  paymentsInfra,
  replyChannelInfra,
];

/**
 * The reference stack (`bin/agentbus.ts`, `npm start`, the tests): `new AgentBus(app, id,
 * PROJECT_STACK)`, as a team's own stack is. Its roles are the modules of
 * functions/roles/modules.ts (to add an agent role here, add its module there) on the default
 * topics; its integrations are the reference applications' (the customer-support application's
 * orders, payment stand-in and reply channel) beside the hub's own, which every stack has; its
 * workflows are content production's (functions/roles/modules.ts REFERENCE_WORKFLOWS).
 */
export const PROJECT_STACK = {
  roles: ROLE_MODULES,
  integrations: PROJECT_INTEGRATIONS,
  workflows: REFERENCE_WORKFLOWS,
} as const satisfies AgentBusApp;

/** The reference stack's topology (what the simulation, the chaos checks and the tests read). */
export const topology = topologyOf(PROJECT_STACK.roles);
