import { contentInfra } from "../../functions/integrations/content/infra";
import { modelInfra } from "../../functions/integrations/model/infra";
import { queueDepthInfra } from "../../functions/integrations/queue-depth/infra";
import { sideEffectsInfra } from "../../functions/integrations/side-effects/infra";
import { workflowRegistryInfra } from "../../functions/integrations/workflow-registry/infra";
import type { AnyIntegrationInfra } from "./integration-infra";

/**
 * The infrastructure of the integrations the hub ships (functions/integrations): every AgentBus
 * stack can wire them, whatever else it is given.
 */
export const HUB_INTEGRATIONS: readonly AnyIntegrationInfra[] = [
  modelInfra,
  sideEffectsInfra,
  contentInfra,
  queueDepthInfra,
  workflowRegistryInfra,
];
