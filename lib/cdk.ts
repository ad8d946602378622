/**
 * AgentBus on the CDK (`agentbus/cdk`): the stack, and what an integration's `infra.ts` is written
 * with. `new AgentBus(app, id, { roles, integrations })` deploys any set of role modules with the
 * infrastructure of the integrations they use (the hub's own integrations are always wired);
 * `AgentBusStack` is the same stack built from a topology written out (`defineTopology`).
 */

export type { AgentBusApp, AgentBusProps } from "./infra/agentbus";
export { AgentBus, DEFAULT_TOPICS, topologyOf } from "./infra/agentbus";
export type { AgentBusStackProps } from "./infra/agentbus-stack";
export { AgentBusStack } from "./infra/agentbus-stack";
export { ConsumerGroup } from "./infra/constructs/consumer-group";
export type { ProvisionedCapacity, TablesCapacity } from "./infra/constructs/table-capacity";
export { HUB_INTEGRATIONS } from "./infra/hub-integrations";
export type {
  AnyIntegrationInfra,
  IntegrationInfra,
  IntegrationScope,
  IntegrationSettings,
  IntegrationUser,
} from "./infra/integration-infra";
export { defineInfra } from "./infra/integration-infra";
export { retentionDaysAt } from "./infra/retention";
export type { GroupDeclaration, Topology, TopologyDeclaration } from "./infra/topology";
export { defineTopology, groupOf } from "./infra/topology";
