import { ulid } from "ulid";
import { DynamoWorkflowRegistry } from "../../functions/adapters/dynamodb/workflow-registry";
import { WorkflowDefinitionError } from "../../functions/core/dag/errors";
import { runInputProblems } from "../../functions/core/dag/input";
import { EVERY_TENANT, scopeLabel, type WorkflowRegistry } from "../../functions/core/dag/registry";
import { STACK_WORKFLOWS_OUTPUT, stackWorkflowsOf } from "../../functions/core/stack-workflows";
import {
  type CompiledWorkflows,
  listWorkflows as listCatalog,
  showWorkflow,
  workflowCatalog,
} from "../../functions/roles/orchestrator/catalog";
import { WORKFLOW_NAME_PATTERN } from "../../schemas/events/workflow";
import { fromSdk } from "./from-sdk";
import { operatorEnvelope, putCommand } from "./operator-command";
import type { OpsStack } from "./stack";
import type { WorkflowSummary, WorkflowView } from "./views";

/**
 * The workflows of a stack as the operator tools see them, through the orchestrator's catalog
 * (functions/roles/orchestrator/catalog.ts): given to the stack (its output `StackWorkflows`, the value its orchestrator runs), registered at
 * run time for every tenant or for one (functions/core/dag/registry.ts); and a start of one, its
 * input checked against the workflow's declared input before anything is sent.
 */

/** The stack's workflow registry (items of its state table). */
export function registryOf(stack: OpsStack): WorkflowRegistry {
  return new DynamoWorkflowRegistry({
    client: fromSdk(stack.dynamodb),
    tableName: stack.names.tables.state,
  });
}

/**
 * The workflows the stack was given, from its outputs (`StackWorkflows`; none
 * when the stack was given none, or when the outputs are not known). An Error names an output
 * that is not the stack's workflows.
 */
export function compiledOf(
  outputs: Readonly<Record<string, string>> | undefined,
): CompiledWorkflows {
  const text = outputs?.[STACK_WORKFLOWS_OUTPUT];
  return workflowCatalog(stackWorkflowsOf(text, `the stack's output ${STACK_WORKFLOWS_OUTPUT}`));
}

/** Where the operator tools read a stack's workflows: compiled in, and its registry. */
export interface StackCatalog {
  readonly compiled: CompiledWorkflows;
  readonly registry: WorkflowRegistry;
}

export function catalogOf(stack: OpsStack): StackCatalog {
  return { compiled: compiledOf(stack.outputs), registry: registryOf(stack) };
}

/**
 * Every workflow a start may name: the stack's, the shared ones, and each
 * tenant's own: `tenant`'s, or with none every tenant's (an operator's view; each row names its
 * scope and tenant).
 */
export function listWorkflows(catalog: StackCatalog, tenant?: string): Promise<WorkflowSummary[]> {
  return listCatalog(
    catalog.compiled,
    catalog.registry,
    tenant === undefined ? undefined : [tenant],
  );
}

/**
 * The workflow a start of `tenant` by `name` runs (the stack's, by name or alias; the tenant's own; the
 * shared one), at `version` or its newest; undefined when there is none.
 */
export function findWorkflow(
  catalog: StackCatalog,
  name: string,
  options: { readonly tenant?: string; readonly version?: number } = {},
): Promise<WorkflowView | undefined> {
  return showWorkflow(catalog.compiled, catalog.registry, name, options);
}

/** How a workflow's scope reads in a sentence. */
export function scopeText(workflow: Pick<WorkflowSummary, "scope" | "tenant">): string {
  switch (workflow.scope) {
    case "stack":
      return "given to the stack";
    case "shared":
      return scopeLabel(EVERY_TENANT);
    case "tenant":
      return scopeLabel(workflow.tenant ?? "");
  }
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
  catalog: StackCatalog,
  request: StartRequest,
): Promise<StartOutcome> {
  const { name, input, tenant } = request;
  if (!WORKFLOW_NAME_PATTERN.test(name))
    return refused(`${JSON.stringify(name)} is not a workflow's name (kebab-case)`);
  let found: WorkflowView | undefined;
  try {
    found = await findWorkflow(catalog, name, tenant === undefined ? {} : { tenant });
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
