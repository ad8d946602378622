import { stepRolesOf } from "../../functions/core/steps";
import { REFERENCE_WORKFLOWS, ROLE_MODULES } from "../../functions/roles/modules";
import { workflowCatalog } from "../../functions/roles/orchestrator/catalog";
import {
  type OrchestratorOptions,
  orchestratorRole,
} from "../../functions/roles/orchestrator/orchestrator";

/**
 * The orchestrator as the reference stack runs it: the step roles of its modules (the content
 * agents among them) and its workflows (content production's), as the stack writes them to the
 * orchestrator's environment.
 */
export const REFERENCE_STEP_ROLES = stepRolesOf(ROLE_MODULES);

export function referenceOrchestrator(options: OrchestratorOptions = {}) {
  return orchestratorRole({
    stepRoles: REFERENCE_STEP_ROLES,
    workflows: REFERENCE_WORKFLOWS,
    ...options,
  });
}

/** The reference stack's orchestrator with its defaults. */
export const orchestrator = referenceOrchestrator();

/** The reference stack's workflows as the orchestrator's catalog has them (scope `stack`). */
export const referenceCatalog = () => workflowCatalog(REFERENCE_WORKFLOWS);
