import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import type { RoleModule } from "../../functions/core/role-module";
import { orchestratorModule } from "../../functions/roles/orchestrator/index";

/**
 * The role modules an application's stack deploys: its own, with the hub's orchestrator when it
 * has workflows and none of its roles orchestrates (`new AgentBus` and the operator CLI's
 * `--app` both read an application so). No CDK here: the CLI loads it.
 */
export function rolesWith(
  roles: readonly RoleModule[],
  workflows: readonly WorkflowDefinition[],
): readonly RoleModule[] {
  if (workflows.length === 0 || roles.some((r) => r.deployment.needs?.orchestrates)) return roles;
  return [...roles, orchestratorModule as RoleModule];
}
