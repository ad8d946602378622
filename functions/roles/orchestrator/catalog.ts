import type { WorkflowDefinition } from "../../core/dag/definition";
import { defineWorkflow } from "../../core/dag/graph";
import {
  definitionForStart,
  EVERY_TENANT,
  registeredDefinition,
  type WorkflowRegistry,
  type WorkflowScope,
} from "../../core/dag/registry";
import { PermanentError } from "../../core/errors";
import type { StepRoleTable } from "../../core/steps";

/**
 * What the orchestrator runs and who carries it out: the workflow definitions it knows, and the
 * step roles of its stack (the table the stack gives it, functions/core/steps.ts).
 *
 * The definitions come from three scopes, and this is where they meet. In the order a start by
 * name looks: `stack`, the workflows the stack was given (`new AgentBus(app, id, { workflows })`,
 * functions/core/stack-workflows.ts), started by name or by the alias a version declares;
 * `tenant`, those the run's tenant registered at run time; `shared`, those registered for every
 * tenant (functions/core/dag/registry.ts). The stack's are compiled in (./CompiledWorkflows) and
 * take their names and aliases: a put of such a name is refused (`workflow.reserved_name`), and a
 * registered workflow stored before the stack took its name is shadowed: never started, listed
 * or shown by that name. The orchestrator, the front door and the operator tools list, show and
 * start through this catalog alike.
 */

/** Where a workflow a start may name comes from, in the order a start looks. */
export const WORKFLOW_SCOPES = ["stack", "tenant", "shared"] as const;
export type WorkflowScopeName = (typeof WORKFLOW_SCOPES)[number];

/** One workflow as the lists show it: its name, scope, tenant (a tenant's own) and versions. */
export interface ListedWorkflow {
  /** The definition's name. */
  readonly name: string;
  /** The other name a start may give (a stack's workflow whose newest versions declare one). */
  readonly alias?: string;
  readonly scope: WorkflowScopeName;
  /** The tenant whose own it is (scope `tenant` only). */
  readonly tenant?: string;
  /** Every version, ascending. */
  readonly versions: readonly number[];
}

/**
 * The name a start gives for a listed workflow: its alias when it has one (a stack's workflow may
 * have a name no start gives, `content.quick-news`), else its name.
 */
export const startNameOf = (workflow: Pick<ListedWorkflow, "name" | "alias">): string =>
  workflow.alias ?? workflow.name;

/** One version of a workflow: its definition, and where it was found with its other versions. */
export interface ShownWorkflow extends ListedWorkflow {
  readonly version: number;
  readonly definition: WorkflowDefinition;
}

/** The workflow definitions compiled into an orchestrator, every version a run may be on. */
export interface CompiledWorkflows {
  /**
   * The definition a start request names: by name or alias, its newest version declaring it, or
   * `version` of that workflow.
   */
  forStart(name: string, version?: number): WorkflowDefinition | undefined;
  /** The definition a run started with; workflow.unknown_definition (permanent) when it is gone. */
  at(name: string, version: number): WorkflowDefinition;
  /** What a start may name: the workflows' names, then their aliases. */
  readonly names: readonly string[];
  /** The stack's workflows, with every version. */
  readonly listed: readonly ListedWorkflow[];
}

/** The newest of `definitions` (undefined when there is none). */
const newestOf = (definitions: readonly WorkflowDefinition[]) =>
  definitions.reduce<WorkflowDefinition | undefined>(
    (found, d) => (found && found.version >= d.version ? found : d),
    undefined,
  );

/**
 * `stack`, the workflows the stack was given: each started by its name (its newest version) or by
 * an alias (the newest version that declares it).
 */
export function workflowCatalog(stack: readonly WorkflowDefinition[] = []): CompiledWorkflows {
  const versionsOf = (name: string) =>
    stack
      .filter((d) => d.name === name)
      .map((d) => d.version)
      .sort((a, b) => a - b);
  const stackNames = [...new Set(stack.map((d) => d.name))];
  const aliased = new Map<string, WorkflowDefinition>();
  for (const d of stack)
    if (d.alias !== undefined) aliased.set(d.alias, newestOf([aliased.get(d.alias) ?? d, d]) ?? d);
  const aliasOf = (name: string) => [...aliased].find(([, d]) => d.name === name)?.[0];
  const listed = stackNames.map((name): ListedWorkflow => {
    const alias = aliasOf(name);
    return {
      name,
      ...(alias === undefined ? {} : { alias }),
      scope: "stack",
      versions: versionsOf(name),
    };
  });
  return {
    names: [...stackNames, ...aliased.keys()],
    listed,
    forStart: (name, version) => {
      const newest = aliased.get(name) ?? newestOf(stack.filter((d) => d.name === name));
      if (version === undefined || !newest) return newest;
      return stack.find((d) => d.name === newest.name && d.version === version);
    },
    at: (name, version) => {
      const found = stack.find((d) => d.name === name && d.version === version);
      if (found) return found;
      const known = stack.map((d) => `${d.name} v${d.version}`).join(", ") || "none";
      throw new PermanentError(
        "workflow.unknown_definition",
        `the run's workflow ${name} v${version} is no longer defined (defined: ${known})`,
        { details: { name, version } },
      );
    },
  };
}

/** A definition a start runs; `scope` when it is a registered one (where it was found). */
export interface StartDefinition {
  readonly definition: WorkflowDefinition;
  readonly scope?: WorkflowScope;
}

/** The workflow definitions one decision of the orchestrator knows. */
export interface WorkflowCatalog {
  /**
   * What a start of `tenant`'s names: a compiled-in workflow (./CompiledWorkflows: its name is
   * never looked up in the registry), else the newest version (or `version`) registered for the
   * tenant, else for every tenant.
   */
  forStart(name: string, tenant: string, version?: number): Promise<StartDefinition | undefined>;
  /** A plan this decision starts a run of: `at` knows it from now on. */
  adopt(plan: WorkflowDefinition): void;
  /** The roles a plan of `tenant`'s may name (`agentbus workflow allow`); none when no policy. */
  planRoles(tenant: string): Promise<readonly string[]>;
  /** The definition a run is on: compiled in, or the registered one this decision read. */
  at(name: string, version: number): WorkflowDefinition;
  /** The compiled-in workflows a start may name. */
  readonly names: readonly string[];
}

/**
 * The catalog of one decision about `run` (undefined before its start): the compiled-in
 * workflows and, for a run on a registered definition, that definition read at the version the
 * run pinned (workflow.unknown_definition, permanent, when it is gone).
 */
export async function catalogFor(
  compiled: CompiledWorkflows,
  registry: WorkflowRegistry | undefined,
  run: RunDefinitionRef | undefined,
): Promise<WorkflowCatalog> {
  const read: WorkflowDefinition[] = [];
  // A run of a plan keeps its definition itself (checked when it started).
  if (run?.plan !== undefined) read.push(defineWorkflow(run.plan as WorkflowDefinition));
  else if (run?.scope !== undefined) {
    const { name, version } = run.workflow;
    if (!registry)
      throw new PermanentError(
        "workflow.unknown_definition",
        `the run's workflow ${name} v${version} is registered, and this orchestrator has no registry`,
      );
    read.push(await registeredDefinition(registry, run.scope, name, version));
  }
  return {
    names: compiled.names,
    forStart: async (name, tenant, version) => {
      if (compiled.names.includes(name)) {
        const definition = compiled.forStart(name, version);
        return definition && { definition };
      }
      const found = registry && (await definitionForStart(registry, tenant, name, version));
      if (found) read.push(found.definition);
      return found;
    },
    adopt: (plan) => {
      read.push(plan);
    },
    planRoles: async (tenant) => (registry && (await registry.allowedRoles(tenant))) ?? [],
    at: (name, version) =>
      read.find((d) => d.name === name && d.version === version) ?? compiled.at(name, version),
  };
}

/**
 * Every workflow a start may name, by scope (./WORKFLOW_SCOPES): the compiled-in ones, then the
 * own of each of `tenants` (undefined: of every tenant that registered one, an operator's view),
 * then the shared ones. A registered name the compiled-in workflows take is left out (shadowed).
 */
export async function listWorkflows(
  compiled: CompiledWorkflows,
  registry: WorkflowRegistry | undefined,
  tenants?: readonly string[],
): Promise<ListedWorkflow[]> {
  const listed = [...compiled.listed];
  if (!registry) return listed;
  const scopes = tenants ?? (await registry.scopes()).filter((s) => s !== EVERY_TENANT);
  for (const scope of [...scopes, EVERY_TENANT])
    for (const w of await registry.list(scope)) {
      if (compiled.names.includes(w.name)) continue;
      const where = scope === EVERY_TENANT ? { scope: "shared" as const } : tenantScope(scope);
      listed.push({ name: w.name, ...where, versions: w.versions });
    }
  return listed;
}

const tenantScope = (tenant: string) => ({ scope: "tenant" as const, tenant });

/**
 * The workflow a start of `tenant` by `name` finds (compiled in; the tenant's own; the shared
 * one; with no tenant, the shared one only), at `version` or its newest, with its scope and every
 * version there; undefined when there is none. A registered definition that no longer passes the
 * language's checks throws its WorkflowDefinitionError.
 */
export async function showWorkflow(
  compiled: CompiledWorkflows,
  registry: WorkflowRegistry | undefined,
  name: string,
  options: { readonly tenant?: string; readonly version?: number } = {},
): Promise<ShownWorkflow | undefined> {
  const { tenant, version } = options;
  if (compiled.names.includes(name)) {
    const definition = compiled.forStart(name, version);
    const listed = definition && compiled.listed.find((w) => w.name === definition.name);
    return definition && listed && { ...listed, version: definition.version, definition };
  }
  if (!registry) return undefined;
  for (const scope of tenant === undefined ? [EVERY_TENANT] : [tenant, EVERY_TENANT]) {
    const listed = (await registry.list(scope)).find((w) => w.name === name);
    const at = version ?? listed?.versions.at(-1);
    if (!listed || at === undefined || !listed.versions.includes(at)) continue;
    const definition = await registeredDefinition(registry, scope, name, at);
    const where = scope === EVERY_TENANT ? { scope: "shared" as const } : tenantScope(scope);
    return { name, ...where, versions: listed.versions, version: at, definition };
  }
  return undefined;
}

/** What names a run's definition: its name and version, where it was registered, or its plan. */
export interface RunDefinitionRef {
  readonly workflow: { readonly name: string; readonly version: number };
  readonly scope?: WorkflowScope;
  readonly plan?: unknown;
}

/** The step roles an orchestrator dispatches to, by group. */
export interface StepRoles {
  readonly table: StepRoleTable;
  /** The role's entry; workflow.unmapped_role (permanent) when the stack has no such step role. */
  of(role: string): StepRoleTable[string];
  /** The roles of `def` that are not step roles of the stack. */
  unknownIn(def: WorkflowDefinition): string[];
  /**
   * Why the stack cannot run `def`, or undefined: a node names a role that is not a step role
   * (`workflow.unknown_step_role`), or a map node's role does not carry out map items
   * (`workflow.map_role_without_items`).
   */
  refusalOf(def: WorkflowDefinition): StartRefusal | undefined;
  /** The known step roles, for messages. */
  readonly names: string;
}

/** Why a start is refused: its code, the node concerned if one, and a message. */
export interface StartRefusal {
  readonly code: string;
  readonly nodeId?: string;
  readonly message: string;
}

export function stepRoles(table: StepRoleTable = {}): StepRoles {
  const names = Object.keys(table).sort().join(", ") || "none";
  const unknownIn = (def: WorkflowDefinition) =>
    [...new Set(def.nodes.flatMap((n) => (n.role === undefined ? [] : [n.role])))].filter(
      (r) => !(r in table),
    );
  return {
    table,
    names,
    of: (role) => {
      const entry = table[role];
      if (entry) return entry;
      throw new PermanentError(
        "workflow.unmapped_role",
        `no step role of this stack is named ${role} (step roles: ${names})`,
        { details: { role } },
      );
    },
    unknownIn,
    refusalOf: (def) => {
      const unknown = unknownIn(def);
      if (unknown.length > 0)
        return {
          code: "workflow.unknown_step_role",
          message: `workflow ${def.name} v${def.version} names ${unknown.join(", ")}, which ${unknown.length === 1 ? "is not a step role" : "are not step roles"} of this stack (step roles: ${names})`,
        };
      const itemless = def.nodes.filter((n) => n.map && n.role && !table[n.role]?.items);
      if (itemless.length > 0)
        return {
          code: "workflow.map_role_without_items",
          ...(itemless[0] ? { nodeId: itemless[0].id } : {}),
          message: `workflow ${def.name} v${def.version}: ${itemless.map((n) => `map node ${n.id} runs ${n.role}`).join(", ")}, which ${itemless.length === 1 ? "does" : "do"} not carry out map items (a step role does when the kit's step handler runs its steps, or when it declares steps.items)`,
        };
      return undefined;
    },
  };
}
