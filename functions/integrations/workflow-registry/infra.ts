import { defineInfra } from "../../../lib/infra/integration-infra";
import { workflowRegistry } from "./index";

/** Nothing to wire: the definitions live in the hub's state table, which every consumer reads. */
export const workflowRegistryInfra = defineInfra(workflowRegistry, () => {});
