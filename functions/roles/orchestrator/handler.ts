import { moduleEntry } from "../../handlers/module-entry";
import { queueDepthAdapter } from "../../integrations/queue-depth/aws";
import { workflowRegistryAdapter } from "../../integrations/workflow-registry/aws";
import { orchestratorModule } from "./index";

export const { create, handler } = moduleEntry(orchestratorModule, [
  queueDepthAdapter,
  workflowRegistryAdapter,
]);
