import { readFileSync } from "node:fs";
import { Command } from "commander";
import { DynamoWorkflowRegistry } from "../../functions/adapters/dynamodb/workflow-registry";
import type { ChildWorkflow } from "../../functions/core/dag/definition";
import { WorkflowDefinitionError } from "../../functions/core/dag/errors";
import { allowPlanRoles } from "../../functions/core/dag/plan";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT, scopeLabel, type WorkflowRegistry } from "../../functions/core/dag/registry";
import { stepRolesOf } from "../../functions/core/steps";
import { startNameOf } from "../../functions/roles/orchestrator/catalog";
import { recordAction } from "../../lib/operator/audit";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { OpsStack } from "../../lib/operator/stack";
import type { WorkflowSummary, WorkflowView } from "../../lib/operator/views";
import { NotFoundError, out, type Target, UsageError } from "./target";
import { tenantArgument, tenantOption } from "./tenant";

/**
 * `agentbus workflow put | list | show <name> | allow`: the workflows a start may name, as the
 * orchestrator's catalog has them (functions/roles/orchestrator/catalog.ts): given to the stack
 * (its output `StackWorkflows`), and registered at run time
 * (functions/core/dag/registry.ts), items of the stack's state table. `put` checks a definition
 * file against the language, its structure, the stack's step roles (the groups its outputs name
 * whose role modules declare `steps`: the reference applications', or `--app`'s) and the names
 * and aliases the stack's workflows take, and refuses it naming every problem (exit 2,
 * nothing written); else it writes the version once and records the put in the audit trail.
 * `allow` sets the roles a tenant's plans may name (functions/core/dag/plan.ts), each a step role
 * of the stack.
 */

type Globals = (command: Command) => Target;

const SCOPE_HELP =
  "the tenant the workflow is for (default: every tenant; a tenant's own comes first at its starts)";

/**
 * Run `use` with the stack and its registry (on its state table). The stack's tools and the role
 * modules load here, when a registry command runs: `workflow start` and the rest stay quick.
 */
async function withRegistry(
  t: Target,
  use: (stack: OpsStack, registry: WorkflowRegistry) => Promise<void>,
): Promise<void> {
  const { withStack } = await import("./ops");
  await withStack(t, (stack) =>
    use(
      stack,
      new DynamoWorkflowRegistry({
        client: fromSdk(stack.dynamodb),
        tableName: stack.names.tables.state,
      }),
    ),
  );
}

/** The step roles of the stack: its groups whose role modules declare steps. */
async function stepRolesOfStack(stack: OpsStack): Promise<string[]> {
  const { operatorModules } = await import("../../lib/operator/groups");
  return Object.keys(stepRolesOf(operatorModules()))
    .filter((group) => stack.groups.includes(group))
    .sort();
}

function readDefinitionFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}; nothing stored`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(`${file} is not JSON (${(error as Error).message}); nothing stored`);
  }
}

/** A refused put, every problem on a line of its own. */
function refusal(file: string, error: WorkflowDefinitionError, roles: readonly string[]): string {
  const listed = (error.details.problems as { code: string; message: string }[] | undefined) ?? [
    { code: error.code, message: error.message },
  ];
  const lines = listed.map((p) => `  ${p.code}: ${p.message}`);
  const hint = listed.some((p) => p.code === "dag.unknown_role")
    ? [
        `  (the stack's step roles: ${roles.join(", ") || "none"}; an application's stack: give its module with --app)`,
      ]
    : [];
  const count = listed.length === 1 ? "1 problem" : `${listed.length} problems`;
  return [`refusing ${file}: ${count}; nothing stored`, ...lines, ...hint].join("\n");
}

/** `workflow put` */
export function putCommand(globals: Globals): Command {
  return new Command("put")
    .description(
      "register a workflow definition (JSON): checked against the language, its structure and the stack's step roles; stored as its next version, or the version it names (a version is written once)",
    )
    .argument(
      "<file>",
      "the definition, a JSON file (functions/core/dag/workflow-definition.schema.json)",
    )
    .addOption(tenantOption(SCOPE_HELP))
    .option("--reason <text>", "why (kept in the audit trail, at most 1000 characters)")
    .action(async function (
      this: Command,
      file: string,
      options: { tenant?: string; reason?: string },
    ) {
      const scope = tenantArgument(options.tenant) ?? EVERY_TENANT;
      const input = readDefinitionFile(file);
      await withRegistry(globals(this), async (stack, registry) => {
        const roles = await stepRolesOfStack(stack);
        const { compiledOf } = await import("../../lib/operator/workflows");
        let put: Awaited<ReturnType<typeof putWorkflow>>;
        try {
          put = await putWorkflow(registry, scope, input, {
            roles,
            reserved: compiledOf(stack.outputs).names,
          });
        } catch (error) {
          if (error instanceof WorkflowDefinitionError)
            throw new UsageError(refusal(file, error, roles));
          throw error;
        }
        const { name, version } = put.definition;
        if (put.outcome === "unchanged") {
          out(
            `unchanged: ${name} v${version} is registered ${scopeLabel(scope)} with this definition; nothing written`,
          );
          return;
        }
        out(`stored ${name} v${version} ${scopeLabel(scope)} in ${stack.names.tables.state}`);
        const id = await recordAction(stack, stack.config, {
          action: "workflow.put",
          target: `${scope}/${name}/${version}`,
          ...(options.reason ? { reason: options.reason } : {}),
          outcome: { count: 1, event_ids: [], failed: 0 },
        });
        out(`recorded in the audit trail as operator.action.recorded ${id}`);
      });
    });
}

/** `workflow allow` */
export function allowCommand(globals: Globals): Command {
  return new Command("allow")
    .description(
      "set the roles a tenant's plans may name (a workflow an agent produced, run as a child): each a step role of the stack; replaces the tenant's list (with no list, its plans may name no role)",
    )
    .argument("[roles...]", "the step roles its plans may name")
    .addOption(tenantOption("the tenant whose plans these are (required)"))
    .option("--none", "its plans may name no role")
    .option("--reason <text>", "why (kept in the audit trail, at most 1000 characters)")
    .action(async function (
      this: Command,
      roles: string[],
      options: { tenant?: string; none?: boolean; reason?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      if (tenant === undefined)
        throw new UsageError("--tenant is required: the roles allowed are a tenant's; nothing set");
      if ((roles.length === 0) === (options.none !== true))
        throw new UsageError(
          "name the roles the tenant's plans may name, or --none for no role (not both); nothing set",
        );
      await withRegistry(globals(this), async (stack, registry) => {
        const known = await stepRolesOfStack(stack);
        let kept: readonly string[];
        try {
          kept = await allowPlanRoles(registry, tenant, roles, known);
        } catch (error) {
          if (error instanceof WorkflowDefinitionError) throw new UsageError(error.message);
          throw error;
        }
        out(`tenant ${tenant}'s plans may name ${kept.length === 0 ? "no role" : kept.join(", ")}`);
        const id = await recordAction(stack, stack.config, {
          action: "workflow.allow",
          target: tenant,
          ...(options.reason ? { reason: options.reason } : {}),
          outcome: { count: kept.length, event_ids: [], failed: 0 },
        });
        out(`recorded in the audit trail as operator.action.recorded ${id}`);
      });
    });
}

/** `workflow list` */
export function listCommand(globals: Globals): Command {
  return new Command("list")
    .description(
      "the workflows a start may name: given to the stack (by name or alias), shared, and every tenant's own (or, with --tenant, that tenant's): scope, tenant, newest version and every version",
    )
    .addOption(tenantOption("of the tenants' own, this tenant's only"))
    .option("--json", "print them as JSON")
    .action(async function (this: Command, options: { tenant?: string; json?: boolean }) {
      const tenant = tenantArgument(options.tenant);
      const { catalogOf, listWorkflows } = await import("../../lib/operator/workflows");
      await withRegistry(globals(this), async (stack) => {
        const listed = await listWorkflows(catalogOf(stack), tenant);
        const rows = listed.map((w) => ({ ...w, newest: w.versions.at(-1) }));
        if (options.json) out(JSON.stringify(rows, null, 2));
        else printRows(rows);
      });
    });
}

function printRows(rows: readonly (WorkflowSummary & { readonly newest?: number })[]) {
  out(
    `${"SCOPE".padEnd(9)} ${"TENANT".padEnd(12)} ${"NAME".padEnd(24)} ${"NEWEST".padEnd(7)} VERSIONS`,
  );
  for (const r of rows)
    out(
      `${r.scope.padEnd(9)} ${(r.tenant ?? "-").padEnd(12)} ${startNameOf(r).padEnd(24)} ${String(r.newest).padEnd(7)} ${r.versions.join(", ")}`,
    );
}

function printDefinition(shown: WorkflowView, scope: string) {
  const { definition, versions } = shown;
  out(`${definition.name} v${definition.version}  (${scope}; versions ${versions.join(", ")})`);
  out("nodes");
  for (const node of definition.nodes) {
    const what = node.role ?? (node.wait ? "wait" : node.workflow ? childOf(node.workflow) : "");
    out(`  ${node.id.padEnd(24)} ${what}${node.map ? " (map)" : ""}`);
  }
  out("edges");
  for (const edge of definition.edges)
    out(
      `  ${edge.from} -> ${edge.to}${edge.when ? ` when ${JSON.stringify(edge.when)}` : ""}${edge.loop ? " (loop)" : ""}`,
    );
}

/** What a child node runs: a workflow by name, or the plan an upstream produces. */
function childOf({ name, version, plan }: ChildWorkflow): string {
  if (plan) return `plan from ${plan.node}${plan.path === undefined ? "" : `.${plan.path}`}`;
  return `workflow ${name}${version === undefined ? "" : ` v${version}`}`;
}

/**
 * `workflow show <name>`: a workflow's definition, as a start of the tenant finds it (`show
 * <run-id>` shows a run).
 */
export async function showDefinition(
  t: Target,
  name: string,
  options: { version?: string; tenant?: string; json?: boolean },
): Promise<void> {
  const version = versionOf(options.version);
  const tenant = tenantArgument(options.tenant);
  const { catalogOf, findWorkflow, scopeText } = await import("../../lib/operator/workflows");
  await withRegistry(t, async (stack) => {
    const found = await findWorkflow(catalogOf(stack), name, {
      ...(tenant === undefined ? {} : { tenant }),
      ...(version === undefined ? {} : { version }),
    });
    if (!found)
      throw new NotFoundError(
        `no workflow ${name}${version === undefined ? "" : ` v${version}`} is given to the stack or registered ${tenant === undefined ? scopeLabel(EVERY_TENANT) : `for tenant ${tenant} or for every tenant`} (agentbus workflow list)`,
      );
    if (options.json) out(JSON.stringify(found.definition, null, 2));
    else printDefinition(found, scopeText(found));
  });
}

function versionOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const version = Number(value);
  if (!Number.isInteger(version) || version < 1)
    throw new UsageError(`--version ${JSON.stringify(value)}: must be a whole number, at least 1`);
  return version;
}
