/**
 * The Lambda side of AgentBus (`agentbus/lambda`): what a role's `handler.ts` and an
 * integration's `aws.ts` are written with. A handler is `moduleEntry(module, adapters)`; an
 * adapter builds an integration's port from the function's environment. The hub's own
 * integrations' adapters are here; an AWS call goes through the `AwsClient` the wiring gives, with
 * the SDK's input and output types (./adapters/aws/operations.ts).
 */

// Calling AWS from an adapter.
export type { AwsClient, AwsCommand, AwsService } from "./adapters/aws/client";
export {
  GetItem,
  Publish,
  PutItem,
  TransactWriteItems,
  UpdateItem,
} from "./adapters/aws/operations";
export { dynamoFailure } from "./adapters/dynamodb/failure";
export { snakeCase } from "./adapters/sdk-errors";
export type {
  AdapterWiring,
  AnyIntegrationAdapter,
  IntegrationAdapter,
} from "./handlers/integration-adapter";
export { defineAdapter } from "./handlers/integration-adapter";
export type { ModuleHandlerOptions } from "./handlers/module-entry";
export { createModuleHandler, familyEntry, moduleEntry } from "./handlers/module-entry";
export { contentAdapter } from "./integrations/content/aws";
export { modelAdapter } from "./integrations/model/aws";
export { queueDepthAdapter } from "./integrations/queue-depth/aws";
export { sideEffectsAdapter } from "./integrations/side-effects/aws";
export { workflowRegistryAdapter } from "./integrations/workflow-registry/aws";
