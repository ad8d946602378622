import { type AnyIntegration, usesOf } from "../../functions/core/integration";
import type { RoleDescriptor } from "../../functions/core/role";
import type { GroupNeeds, RoleModule } from "../../functions/core/role-module";
import {
  orchestratingDescriptor,
  type StepRoleTable,
  stepRolesOf,
} from "../../functions/core/steps";
import { ROLE_MODULES } from "../../functions/roles/modules";

/**
 * The consumer groups as the operator tools run them, read from the role modules of the
 * application the stack was built from: the reference applications' (functions/roles/modules.ts),
 * or a team's, given by `--app` (bin/cli/app.ts). The operator tools read them here rather than from the topology,
 * which loads the CDK: the CLI stays quick to start. Which groups a deployed stack has comes from
 * its outputs (./stack.ts, topologyOfOutputs); this only says what each group's role is.
 */

/** One consumer group: its name, its role, what it needs besides its queues, what it calls. */
export interface OperatorGroup {
  readonly name: string;
  readonly role: RoleDescriptor;
  readonly needs?: GroupNeeds;
  /** The integrations its decision calls (its module's `uses`). */
  readonly integrations?: readonly AnyIntegration[];
}

/** The role modules the tools run: the CLI's `--app`, else the reference applications'. */
let modules: readonly RoleModule[] = ROLE_MODULES;

/**
 * The application whose roles the operator tools run from here on (`agentbus --app <module>`):
 * a team's stack has its own roles, which no list of this repository's knows.
 */
export function useRoleModules(roles: readonly RoleModule[]): void {
  modules = roles;
}

/** The role modules the operator tools run. */
export function operatorModules(): readonly RoleModule[] {
  return modules;
}

/** The table of step roles of those modules (what the stack gives its orchestrator). */
export function operatorStepRoles(): StepRoleTable {
  return stepRolesOf(modules);
}

/**
 * The roles of a stack's groups (its outputs name them) as the role modules describe them; a group
 * no module describes is left out.
 */
export function rolesOfGroups(groups: readonly string[]): RoleDescriptor[] {
  return operatorGroups()
    .filter((g) => groups.includes(g.name))
    .map((g) => g.role);
}

/** The consumer groups of those modules, as the operator tools run them. */
export function operatorGroups(): readonly OperatorGroup[] {
  const table = stepRolesOf(modules);
  return modules.map((module) => ({
    name: module.descriptor.group,
    role: module.deployment.needs?.orchestrates
      ? orchestratingDescriptor(module.descriptor, table)
      : module.descriptor,
    ...(module.deployment.needs ? { needs: module.deployment.needs } : {}),
    integrations: usesOf(module.uses).map(([, use]) => use.integration),
  }));
}
