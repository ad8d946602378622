import { confirmEventType } from "../../../schemas/events/agent-run";
import { CONTENT_ROLE_EVENTS, WORKFLOW_KINDS } from "../../../schemas/events/workflow";
import type { WorkflowDefinition } from "../../core/dag/definition";
import {
  definitionForStart,
  registeredDefinition,
  type WorkflowRegistry,
  type WorkflowScope,
} from "../../core/dag/registry";
import { PermanentError } from "../../core/errors";
import type { StepRoleTable } from "../../core/steps";
import { CONTENT_AGENTS, CONTENT_WORKFLOWS, contentWorkflowFor } from "../content-agents/workflows";

/**
 * What the orchestrator runs and who carries it out: the workflow definitions it knows (the
 * content workflows, those compiled into an application's orchestrator, and those registered at
 * run time), and the step roles of its stack (the table the stack gives it,
 * functions/core/steps.ts).
 */

/** The workflow definitions compiled into an orchestrator, every version a run may be on. */
export interface CompiledWorkflows {
  /** The definition a start request names: a content kind, or a definition's name (its newest version). */
  forStart(name: string): WorkflowDefinition | undefined;
  /** The definition a run started with; workflow.unknown_definition (permanent) when it is gone. */
  at(name: string, version: number): WorkflowDefinition;
  /** What a start may name. */
  readonly names: readonly string[];
}

export function workflowCatalog(extra: readonly WorkflowDefinition[] = []): CompiledWorkflows {
  const all = [...CONTENT_WORKFLOWS, ...extra];
  const extraNames = [...new Set(extra.map((d) => d.name))];
  return {
    names: [...WORKFLOW_KINDS, ...extraNames],
    forStart: (name) => {
      if ((WORKFLOW_KINDS as readonly string[]).includes(name))
        return contentWorkflowFor({ kind: name });
      const versions = extra.filter((d) => d.name === name);
      if (versions.length === 0) return undefined;
      return versions.reduce((newest, d) => (d.version > newest.version ? d : newest));
    },
    at: (name, version) => {
      const found = all.find((d) => d.name === name && d.version === version);
      if (found) return found;
      const known = all.map((d) => `${d.name} v${d.version}`).join(", ");
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
   * What a start of `tenant`'s names: a compiled-in workflow first (./CompiledWorkflows), else
   * the newest version registered for the tenant, else for every tenant.
   */
  forStart(name: string, tenant: string): Promise<StartDefinition | undefined>;
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
  run: { readonly workflow: { name: string; version: number }; scope?: WorkflowScope } | undefined,
): Promise<WorkflowCatalog> {
  const read: WorkflowDefinition[] = [];
  if (run?.scope !== undefined) {
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
    forStart: async (name, tenant) => {
      const definition = compiled.forStart(name);
      if (definition) return { definition };
      const found = registry && (await definitionForStart(registry, tenant, name));
      if (found) read.push(found.definition);
      return found;
    },
    at: (name, version) =>
      read.find((d) => d.name === name && d.version === version) ?? compiled.at(name, version),
  };
}

/** The step roles an orchestrator dispatches to, by group. */
export interface StepRoles {
  readonly table: StepRoleTable;
  /** The role's entry; workflow.unmapped_role (permanent) when the stack has no such step role. */
  of(role: string): StepRoleTable[string];
  /** The roles of `def` that are not step roles of the stack. */
  unknownIn(def: WorkflowDefinition): string[];
  /** The known step roles, for messages. */
  readonly names: string;
}

/**
 * The content agents as step roles: what an orchestrator built without a stack's table knows.
 * They carry out map items (one agent run per item).
 */
export const CONTENT_STEP_ROLES: StepRoleTable = Object.fromEntries(
  CONTENT_AGENTS.map(({ agent, requested, cancel }) => [
    agent,
    { requested, cancel, confirm: confirmEventType(CONTENT_ROLE_EVENTS[agent].stem), items: true },
  ]),
);

export function stepRoles(table: StepRoleTable = CONTENT_STEP_ROLES): StepRoles {
  const names = Object.keys(table).sort().join(", ") || "none";
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
    unknownIn: (def) =>
      [...new Set(def.nodes.flatMap((n) => (n.role === undefined ? [] : [n.role])))].filter(
        (r) => !(r in table),
      ),
  };
}
