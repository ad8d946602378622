import type { WorkflowDefinition } from "./definition";
import { WorkflowDefinitionError } from "./errors";
import { defineWorkflow } from "./graph";

/**
 * The workflow registry: definitions put at run time (`agentbus workflow put`), each version
 * written once and never changed, which the orchestrator starts by name and reads back by the
 * version a run pinned. Implementations: InMemoryWorkflowRegistry here, DynamoWorkflowRegistry
 * (items of the state table) in functions/adapters/dynamodb. What a put checks and how a version
 * is chosen is ./register.
 *
 * Scope: a definition belongs to one tenant, or to every tenant (EVERY_TENANT) when the operator
 * puts it without naming one. A run of tenant T started by name runs T's own definition of that
 * name when T has one, else the one for every tenant (a run that names no tenant is the default
 * tenant's).
 */

/** The scope of a definition put for every tenant (no tenant id has a `*`). */
export const EVERY_TENANT = "*";

/** A tenant id, or EVERY_TENANT. */
export type WorkflowScope = string;

/** One registered workflow of a scope: its name and every version put, ascending. */
export interface RegisteredWorkflow {
  readonly name: string;
  readonly versions: readonly number[];
}

/** The registry's port (no checks here: a definition reaches it validated). */
export interface WorkflowRegistry {
  /**
   * Write version `definition.version` of `definition.name` in `scope` unless that version
   * exists: true when written, false when it was there (and is left as it was).
   */
  create(scope: WorkflowScope, definition: WorkflowDefinition): Promise<boolean>;
  /** The definition as it was put (JSON), or undefined. */
  get(scope: WorkflowScope, name: string, version: number): Promise<unknown>;
  /** The workflows of a scope, by name. */
  list(scope: WorkflowScope): Promise<readonly RegisteredWorkflow[]>;
  /**
   * Every scope a workflow was ever put in (tenants and EVERY_TENANT), sorted: an operator's list
   * of every tenant's workflows reads each of them. It may name a scope whose put failed.
   */
  scopes(): Promise<readonly WorkflowScope[]>;
  /**
   * The roles a plan of `tenant`'s may name (an agent's output run as a child workflow), as the
   * operator last set them; undefined when no policy was ever set.
   */
  allowedRoles(tenant: string): Promise<readonly string[] | undefined>;
  /** Set the roles a plan of `tenant`'s may name (replacing the list; empty: none). */
  allowRoles(tenant: string, roles: readonly string[]): Promise<void>;
}

/** A registered definition and the scope it was found in. */
export interface FoundDefinition {
  readonly scope: WorkflowScope;
  readonly definition: WorkflowDefinition;
}

/** The newest version of a workflow in `scope`, or undefined. */
export async function newestIn(
  registry: WorkflowRegistry,
  scope: WorkflowScope,
  name: string,
): Promise<number | undefined> {
  const found = (await registry.list(scope)).find((w) => w.name === name);
  return found?.versions.at(-1);
}

/**
 * What a run of `tenant` started by `name` runs: the newest version (or `version`) of the
 * tenant's own definition of that name, else of the one for every tenant; undefined when neither
 * exists.
 */
export async function definitionForStart(
  registry: WorkflowRegistry,
  tenant: string,
  name: string,
  version?: number,
): Promise<FoundDefinition | undefined> {
  for (const scope of [tenant, EVERY_TENANT]) {
    const at = version ?? (await newestIn(registry, scope, name));
    if (at === undefined) continue;
    if (version !== undefined && (await registry.get(scope, name, at)) === undefined) continue;
    return { scope, definition: await registeredDefinition(registry, scope, name, at) };
  }
  return undefined;
}

/**
 * A registered version, compiled (`defineWorkflow`, no role check: the caller checks the stack's
 * step roles). WorkflowDefinitionError `workflow.unknown_definition` when it is not there.
 */
export async function registeredDefinition(
  registry: WorkflowRegistry,
  scope: WorkflowScope,
  name: string,
  version: number,
): Promise<WorkflowDefinition> {
  const stored = await registry.get(scope, name, version);
  if (stored === undefined)
    throw new WorkflowDefinitionError(
      "workflow.unknown_definition",
      `no workflow ${name} v${version} is registered ${scopeLabel(scope)}`,
      { details: { scope, name, version } },
    );
  return defineWorkflow(stored as WorkflowDefinition);
}

/** "for every tenant" or "for tenant acme", as messages say it. */
export function scopeLabel(scope: WorkflowScope): string {
  return scope === EVERY_TENANT ? "for every tenant" : `for tenant ${scope}`;
}

/**
 * The registry of tests, the simulation and the local runtime: what was put, as JSON text, so a
 * reader gets a copy as it would from DynamoDB.
 */
export class InMemoryWorkflowRegistry implements WorkflowRegistry {
  private readonly definitions = new Map<string, string>();
  private readonly policies = new Map<string, readonly string[]>();

  async create(scope: WorkflowScope, definition: WorkflowDefinition): Promise<boolean> {
    const key = keyOf(scope, definition.name, definition.version);
    if (this.definitions.has(key)) return false;
    this.definitions.set(key, JSON.stringify(definition));
    return true;
  }

  async get(scope: WorkflowScope, name: string, version: number): Promise<unknown> {
    const text = this.definitions.get(keyOf(scope, name, version));
    return text === undefined ? undefined : JSON.parse(text);
  }

  async list(scope: WorkflowScope): Promise<readonly RegisteredWorkflow[]> {
    const versions = new Map<string, number[]>();
    for (const key of this.definitions.keys()) {
      const [s, name, version] = JSON.parse(key) as [string, string, number];
      if (s === scope) versions.set(name, [...(versions.get(name) ?? []), version]);
    }
    return [...versions.entries()]
      .map(([name, v]) => ({ name, versions: v.sort((a, b) => a - b) }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async scopes(): Promise<readonly WorkflowScope[]> {
    const scopes = [...this.definitions.keys()].map((key) => (JSON.parse(key) as [string])[0]);
    return [...new Set(scopes)].sort();
  }

  async allowedRoles(tenant: string): Promise<readonly string[] | undefined> {
    const roles = this.policies.get(tenant);
    return roles && [...roles];
  }

  async allowRoles(tenant: string, roles: readonly string[]): Promise<void> {
    this.policies.set(tenant, [...roles]);
  }
}

function keyOf(scope: WorkflowScope, name: string, version: number): string {
  return JSON.stringify([scope, name, version]);
}
