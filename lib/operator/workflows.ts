import { ulid } from "ulid";
import { DynamoWorkflowRegistry } from "../../functions/adapters/dynamodb/workflow-registry";
import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import { WorkflowDefinitionError } from "../../functions/core/dag/errors";
import { runInputProblems } from "../../functions/core/dag/input";
import {
  EVERY_TENANT,
  newestIn,
  registeredDefinition,
  scopeLabel,
  type WorkflowRegistry,
} from "../../functions/core/dag/registry";
import { WORKFLOW_KINDS } from "../../functions/roles/content-agents/events";
import {
  CONTENT_WORKFLOWS,
  contentWorkflowFor,
} from "../../functions/roles/content-agents/workflows";
import { WORKFLOW_NAME_PATTERN } from "../../schemas/events/workflow";
import { fromSdk } from "./from-sdk";
import { operatorEnvelope, putCommand } from "./operator-command";
import type { OpsStack } from "./stack";
import type { WorkflowSummary, WorkflowView } from "./views";

/**
 * The workflows of a stack as the operator tools see them: compiled into the orchestrator (the
 * content workflows, started by kind) and registered at run time (functions/core/dag/registry.ts),
 * for every tenant or for one; and a start of one, its input checked against the workflow's
 * declared input before anything is sent.
 */

/** The stack's workflow registry (items of its state table). */
export function registryOf(stack: OpsStack): WorkflowRegistry {
  return new DynamoWorkflowRegistry({
    client: fromSdk(stack.dynamodb),
    tableName: stack.names.tables.state,
  });
}

/** The scope a view names: `built-in`, `every tenant` (`*`) or a tenant's id. */
export const BUILT_IN = "built-in";

const builtInOf = (kind: string): WorkflowDefinition[] => {
  const name = contentWorkflowFor({ kind }).name;
  return CONTENT_WORKFLOWS.filter((d) => d.name === name).sort((a, b) => a.version - b.version);
};

/**
 * Every workflow a start may name: the built-in ones, those registered for every tenant, and,
 * with `tenant`, that tenant's own (a tenant's list is read by its id: the registry keeps no
 * list of tenants).
 */
export async function listWorkflows(
  registry: WorkflowRegistry,
  tenant?: string,
): Promise<WorkflowSummary[]> {
  const listed: WorkflowSummary[] = WORKFLOW_KINDS.map((kind) => ({
    name: kind,
    scope: BUILT_IN,
    versions: builtInOf(kind).map((d) => d.version),
  }));
  const scopes = tenant === undefined ? [EVERY_TENANT] : [tenant, EVERY_TENANT];
  for (const scope of scopes)
    for (const w of await registry.list(scope))
      listed.push({ name: w.name, scope, versions: w.versions });
  return listed;
}

/**
 * The workflow a start of `tenant` by `name` runs (built in; the tenant's own; every tenant's),
 * at `version` or its newest; undefined when there is none.
 */
export async function findWorkflow(
  registry: WorkflowRegistry,
  name: string,
  options: { readonly tenant?: string; readonly version?: number } = {},
): Promise<WorkflowView | undefined> {
  if ((WORKFLOW_KINDS as readonly string[]).includes(name)) {
    const versions = builtInOf(name);
    const definition = versions.find((d) => d.version === (options.version ?? d.version));
    const newest = options.version === undefined ? versions.at(-1) : definition;
    return (
      newest &&
      viewOf(
        name,
        BUILT_IN,
        newest,
        versions.map((d) => d.version),
      )
    );
  }
  const { tenant } = options;
  for (const scope of tenant === undefined ? [EVERY_TENANT] : [tenant, EVERY_TENANT]) {
    const listed = (await registry.list(scope)).find((w) => w.name === name);
    const version = options.version ?? (await newestIn(registry, scope, name));
    if (!listed || version === undefined || !listed.versions.includes(version)) continue;
    const definition = await registeredDefinition(registry, scope, name, version);
    return viewOf(name, scope, definition, listed.versions);
  }
  return undefined;
}

function viewOf(
  name: string,
  scope: string,
  definition: WorkflowDefinition,
  versions: readonly number[],
): WorkflowView {
  return { name, scope, version: definition.version, versions, definition };
}

/** How a scope reads in a sentence. */
export function scopeText(scope: string): string {
  return scope === BUILT_IN ? "built into the orchestrator" : scopeLabel(scope);
}

/** What a start asks for: the workflow's name, its input, the run's tenant (default: none). */
export interface StartRequest {
  readonly name: string;
  readonly input: Record<string, unknown>;
  readonly tenant?: string;
}

/** What a start did: sent (with the run's page as `next`) or refused (nothing sent), and why. */
export interface StartOutcome {
  readonly kind: "sent" | "refused";
  readonly message: string;
  readonly next?: string;
}

/**
 * Start a run: refused, naming every problem and sending nothing, when no such workflow is known
 * for the tenant or the input does not fit its declared input; else `workflow.start.requested`
 * for a new run `run_<ULID>` on the commands bus, and `next` is the run's page.
 */
export async function startWorkflow(
  stack: OpsStack,
  registry: WorkflowRegistry,
  request: StartRequest,
): Promise<StartOutcome> {
  const { name, input, tenant } = request;
  if (!WORKFLOW_NAME_PATTERN.test(name))
    return refused(`${JSON.stringify(name)} is not a workflow's name (kebab-case)`);
  let found: WorkflowView | undefined;
  try {
    found = await findWorkflow(registry, name, tenant === undefined ? {} : { tenant });
  } catch (error) {
    if (!(error instanceof WorkflowDefinitionError)) throw error;
    return refused(`workflow ${name} cannot be started: ${error.message}`);
  }
  if (!found)
    return refused(
      `no workflow ${name} is known ${tenant === undefined ? "for the default tenant" : `for tenant ${tenant}`}`,
    );
  const problems = runInputProblems(found.definition.input, input);
  if (problems.length > 0)
    return refused(
      `the input does not fit ${name} v${found.version}: ${problems.length} problem(s): ${problems.join("; ")}`,
    );
  const runId = `run_${ulid()}`;
  const envelope = operatorEnvelope({
    type: "workflow.start.requested",
    aggregate: { type: "dag_run", id: runId },
    ...(tenant === undefined ? {} : { tenantId: tenant }),
    payload: { run_id: runId, workflow_name: name, request: input },
  });
  if (typeof envelope === "string") return refused(`refusing to send an ${envelope}`);
  const bus = await putCommand(stack, stack.config, envelope);
  return {
    kind: "sent",
    message: `workflow.start.requested sent to ${bus} (event id ${String(envelope.event_id)}): run ${runId} of ${name} v${found.version}`,
    next: `/runs/${encodeURIComponent(runId)}`,
  };
}

const refused = (why: string): StartOutcome => ({
  kind: "refused",
  message: `${why}; nothing sent`,
});
