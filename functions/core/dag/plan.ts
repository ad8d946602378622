import type { WorkflowDefinition } from "./definition";
import { WorkflowDefinitionError } from "./errors";
import { checkedDefinition, type Listed } from "./register";
import type { WorkflowRegistry } from "./registry";
import { byString, isRecord } from "./values";

/**
 * Plans: a workflow definition an agent produced (an upstream's output) that a child node runs
 * (`workflow: { plan: { node, path } }`). A model's output is untrusted input, so before anything
 * of a plan runs it is checked as a put is (./register: the language, its structure, its name,
 * its size; every problem named at once) and against the roles its tenant's plans may name: a
 * policy the operator sets per tenant (`agentbus workflow allow --tenant <t> <role...>`), which
 * the registry keeps (./registry `allowedRoles`).
 *
 * With no policy a tenant's plans may name no role, so every plan is refused until an operator
 * allows roles: a plan runs a role with the tenant's authority, and what an agent may make the
 * hub do is granted, never assumed. A plan may run waits, maps and plans of its own (each checked
 * when it starts); a child node naming a workflow by name is refused like a role not allowed,
 * since its roles are not the plan's to choose.
 */

/** The largest plan sent to a child run, in bytes of JSON (it travels in one event and is kept
 * in the child run's state). */
export const MAX_PLAN_BYTES = 100_000;

/** Why a plan does not run: a code and a message naming every problem. */
export interface PlanRefusal {
  readonly code: string;
  readonly message: string;
}

/** A plan checked: the definition to run, or why not. */
export type CheckedPlan =
  | { readonly definition: WorkflowDefinition }
  | { readonly refusal: PlanRefusal };

/**
 * Check a plan of `tenant`'s, whose plans may name the roles in `allowed`: the definition (its
 * version 1 unless it names one), or the refusal: `workflow.invalid_plan` listing every problem
 * of the definition, else `workflow.plan_role_not_allowed` listing what it names that it may not
 * and what it may.
 */
export function checkPlan(plan: unknown, tenant: string, allowed: readonly string[]): CheckedPlan {
  if (!isRecord(plan) || Array.isArray(plan))
    return refuse("workflow.invalid_plan", "the plan is not a JSON object (a workflow definition)");
  const { $schema: _editor, ...input } = plan;
  let definition: WorkflowDefinition;
  try {
    definition = checkedDefinition({ version: 1, ...input }, {});
  } catch (error) {
    if (!(error instanceof WorkflowDefinitionError)) throw error;
    const problems = (error.details.problems as Listed[] | undefined) ?? [error];
    const listed = problems.map((p) => `${p.code}: ${p.message}`).join("; ");
    const count = problems.length === 1 ? "1 problem" : `${problems.length} problems`;
    return refuse(
      "workflow.invalid_plan",
      `the plan is not a valid workflow (${count}): ${listed}`,
    );
  }
  const refused = notAllowed(definition, allowed);
  if (refused.length === 0) return { definition };
  const may =
    allowed.length === 0
      ? `tenant ${tenant}'s plans may name no role (agentbus workflow allow --tenant ${tenant} <role...>)`
      : `tenant ${tenant}'s plans may name ${[...allowed].sort(byString).join(", ")}`;
  return refuse(
    "workflow.plan_role_not_allowed",
    `the plan ${definition.name} names ${refused.join(", ")}, which it may not: ${may}`,
  );
}

/** The roles (and workflows by name) a plan names outside `allowed`, each once. */
function notAllowed(definition: WorkflowDefinition, allowed: readonly string[]): string[] {
  const named = definition.nodes.flatMap((node) => {
    if (node.role !== undefined) return allowed.includes(node.role) ? [] : [node.role];
    if (node.workflow?.name !== undefined) return [`workflow ${node.workflow.name}`];
    return [];
  });
  return [...new Set(named)].sort(byString);
}

function refuse(code: string, message: string): CheckedPlan {
  return { refusal: { code, message } };
}

/**
 * Set the roles `tenant`'s plans may name: each a step role of the stack (`roles`), else a
 * WorkflowDefinitionError `workflow.unknown_role` naming every one that is not, and nothing set.
 * Returns the list as kept (sorted, each once).
 */
export async function allowPlanRoles(
  registry: WorkflowRegistry,
  tenant: string,
  requested: readonly string[],
  roles: Iterable<string>,
): Promise<readonly string[]> {
  const known = new Set(roles);
  const unknown = requested.filter((role) => !known.has(role));
  if (unknown.length > 0)
    throw new WorkflowDefinitionError(
      "workflow.unknown_role",
      `${unknown.join(", ")} ${unknown.length === 1 ? "is not a step role" : "are not step roles"} of this stack (step roles: ${[...known].sort(byString).join(", ") || "none"}); nothing set`,
      { details: { unknown } },
    );
  const kept = [...new Set(requested)].sort(byString);
  await registry.allowRoles(tenant, kept);
  return kept;
}
