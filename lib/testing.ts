/**
 * AgentBus's in-memory test kit (`agentbus/testing`): a role module under test, in memory and in
 * milliseconds, through the same pipeline a deployed consumer runs, its integrations replaced by
 * their in-memory twins (or the stand-ins a test gives by integration name).
 */

export { InMemoryEventStore } from "../functions/core/memory";
export { ManualClock } from "../functions/core/runtime";
export { modelSchemasJson } from "./dev/model-schema-files";
export { IntegrationTwins, memoryRolePorts } from "./dev/role-kit/memory-ports";
export type {
  DeliverOptions,
  MessageFields,
  RoleUnderTest,
  TestRoleOptions,
} from "./dev/role-kit/test-role";
export { testRole } from "./dev/role-kit/test-role";
