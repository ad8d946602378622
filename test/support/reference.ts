import type { DeterministicLocalModelProps } from "../../functions/adapters/local-model";
import { InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import { usesOf } from "../../functions/core/integration";
import { stepRolesOf } from "../../functions/core/steps";
import type { FrontDoorWorkflows } from "../../functions/front-door/workflows";
import { localModelOf } from "../../functions/integrations/model";
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

/** The reference stack's definition of a run (the name and version it pinned). */
export const definitionOfRun = (state: {
  readonly run: { readonly workflow: { readonly name: string; readonly version: number } };
}) => referenceCatalog().at(state.run.workflow.name, state.run.workflow.version);

/** The front door's workflows in the reference stack: its workflows, its step roles, an empty registry. */
export const REFERENCE_FRONT_DOOR_WORKFLOWS: FrontDoorWorkflows = {
  registry: new InMemoryWorkflowRegistry(),
  stepRoles: Object.keys(REFERENCE_STEP_ROLES).sort(),
  compiled: referenceCatalog(),
};

/**
 * The local model with the reference applications' scripts, as their roles register them (the
 * `localScripts` of each one's use of the model); `props.scripts` replace those of their roles.
 */
export function referenceLocalModel(props: DeterministicLocalModelProps = {}) {
  return localModelOf(
    ROLE_MODULES.flatMap((module) => usesOf(module.uses).map(([, use]) => use)),
    props,
  );
}
