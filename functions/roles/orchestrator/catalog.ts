import { confirmEventType } from "../../../schemas/events/agent-run";
import { CONTENT_ROLE_EVENTS, WORKFLOW_KINDS } from "../../../schemas/events/workflow";
import type { WorkflowDefinition } from "../../core/dag/definition";
import { PermanentError } from "../../core/errors";
import type { StepRoleTable } from "../../core/steps";
import { CONTENT_AGENTS, CONTENT_WORKFLOWS, contentWorkflowFor } from "../content-agents/workflows";

/**
 * What the orchestrator runs and who carries it out: the workflow definitions it knows (the
 * content workflows, and those compiled into an application's orchestrator), and the step roles
 * of its stack (the table the stack gives it, functions/core/steps.ts).
 */

/** The workflow definitions an orchestrator knows, every version a run may be on. */
export interface WorkflowCatalog {
  /** The definition a start request names: a content kind, or a definition's name (its newest version). */
  forStart(name: string): WorkflowDefinition | undefined;
  /** The definition a run started with; workflow.unknown_definition (permanent) when it is gone. */
  at(name: string, version: number): WorkflowDefinition;
  /** What a start may name. */
  readonly names: readonly string[];
}

export function workflowCatalog(extra: readonly WorkflowDefinition[] = []): WorkflowCatalog {
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

/** The content agents as step roles: what an orchestrator built without a stack's table knows. */
export const CONTENT_STEP_ROLES: StepRoleTable = Object.fromEntries(
  CONTENT_AGENTS.map(({ agent, requested, cancel }) => [
    agent,
    { requested, cancel, confirm: confirmEventType(CONTENT_ROLE_EVENTS[agent].stem) },
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
