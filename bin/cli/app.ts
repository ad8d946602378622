import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import type { RoleModule } from "../../functions/core/role-module";
import { rolesWith } from "../../lib/infra/app-roles";
import { UsageError } from "./target";

/**
 * `agentbus --app <module>` (or `$AGENTBUS_APP`): the application whose roles the operator tools
 * run (`rebuild` and `check` fold its groups' streams with them, `trace` asks them what their
 * states record, `resolve --as answer` checks an answer against its agent's schema). The module is
 * the application's own, as Node.js imports it (compiled JavaScript, or TypeScript where a loader
 * is registered); among its exports is what its stack was built with: an object with `roles`,
 * the one `new AgentBus(app, id, { roles, integrations })` is given (with the hub's orchestrator
 * when it gives workflows, as the stack adds it). Without `--app`, the reference applications'
 * roles.
 */
export async function useApplication(file: string): Promise<void> {
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(resolve(file)).href)) as Record<string, unknown>;
  } catch (error) {
    throw new UsageError(`--app ${file} does not load: ${(error as Error).message}`);
  }
  const roles = rolesOf(exports);
  if (!roles)
    throw new UsageError(
      `--app ${file} exports no application: export what its stack is given, an object with its role modules as roles`,
    );
  const { useRoleModules } = await import("../../lib/operator/groups");
  useRoleModules(roles);
}

/** The role modules of the first export that is an application (`{ roles: [...] }`). */
function rolesOf(exports: Record<string, unknown>): readonly RoleModule[] | undefined {
  for (const value of Object.values(exports)) {
    const app = value as { roles?: unknown; workflows?: readonly WorkflowDefinition[] } | null;
    const roles = app?.roles;
    if (Array.isArray(roles) && roles.every(isModule))
      return rolesWith(roles, app?.workflows ?? []);
  }
  return undefined;
}

function isModule(value: unknown): value is RoleModule {
  const module = value as Partial<RoleModule> | null;
  return typeof module?.descriptor?.group === "string" && typeof module.build === "function";
}
