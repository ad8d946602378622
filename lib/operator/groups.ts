import { type AnyIntegration, usesOf } from "../../functions/core/integration";
import type { RoleDescriptor } from "../../functions/core/role";
import type { GroupNeeds } from "../../functions/core/role-module";
import { ROLE_MODULES } from "../../functions/roles/modules";

/**
 * The project's consumer groups as the operator tools run them, read from the role modules
 * (functions/roles/modules.ts), the list the stack's topology (lib/infra/topology.ts) is built
 * and validated from at synth. The operator tools read them here rather than from the topology,
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

export const OPERATOR_GROUPS: readonly OperatorGroup[] = ROLE_MODULES.map((module) => ({
  name: module.descriptor.group,
  role: module.descriptor,
  ...(module.deployment.needs ? { needs: module.deployment.needs } : {}),
  integrations: usesOf(module.uses).map(([, use]) => use.integration),
}));
