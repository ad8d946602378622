import { RunInput } from "../../schemas/events/run-input";
import * as z from "../../schemas/zod";
import type { WorkflowDefinition } from "../core/dag/definition";
import { WorkflowDefinitionError } from "../core/dag/errors";
import { runInputProblems } from "../core/dag/input";
import { MAX_DEFINITION_BYTES, putWorkflow } from "../core/dag/register";
import type { WorkflowRegistry } from "../core/dag/registry";
import {
  type CompiledWorkflows,
  type ListedWorkflow,
  listWorkflows,
  type ShownWorkflow,
  showWorkflow,
  WORKFLOW_SCOPES,
  type WorkflowScopeName,
  workflowCatalog,
} from "../roles/orchestrator/catalog";
import { bodyOf, fail, type HttpRequest, type HttpResponse, issue, json } from "./http";
import type { Caller } from "./identity";

/**
 * The front door's workflows: what a tenant may start and register. A tenant registers a
 * definition in its own scope (`PUT /v1/workflows/{name}`, the checks of `agentbus workflow put`:
 * functions/core/dag/register.ts) and reads, through the orchestrator's catalog
 * (functions/roles/orchestrator/catalog.ts), the stack's workflows (`WORKFLOWS`, the value the
 * orchestrator is given), its own and the shared ones (put by an operator for every tenant);
 * never another tenant's. A put may not take a stack workflow's name or alias. A
 * start runs what the orchestrator would run for that tenant and name, and its body must fit the
 * workflow's declared input (functions/core/dag/input.ts).
 */

/** The registry the front door reads and writes, the stack's step roles and its workflows. */
export interface FrontDoorWorkflows {
  readonly registry: WorkflowRegistry;
  /** The stack's step roles (every role a registered node names must be one). */
  readonly stepRoles: readonly string[];
  /** The stack's workflows (`workflowCatalog(stack workflows)`). @default none */
  readonly compiled?: CompiledWorkflows;
}

export { WORKFLOW_SCOPES, type WorkflowScopeName };

/** The compiled-in workflows of a front door told of no stack workflows: none. */
const NONE = workflowCatalog();

const compiledOf = (workflows: FrontDoorWorkflows | undefined) => workflows?.compiled ?? NONE;

/**
 * The workflow a start (or a read) of `tenant` by `name` finds, at `version` or its newest, or
 * 404. A registered definition that no longer passes the language's checks is refused here as
 * the orchestrator would refuse it.
 */
export async function tenantWorkflow(
  workflows: FrontDoorWorkflows | undefined,
  tenant: string,
  name: string,
  version?: number,
): Promise<ShownWorkflow> {
  const compiled = compiledOf(workflows);
  let found: ShownWorkflow | undefined;
  try {
    found = await showWorkflow(compiled, workflows?.registry, name, {
      tenant,
      ...(version === undefined ? {} : { version }),
    });
  } catch (error) {
    if (!(error instanceof WorkflowDefinitionError)) throw error;
    fail("invalid_request", `workflow ${name} cannot be started: ${error.message}`);
  }
  if (!found)
    fail(
      "not_found",
      `no workflow ${JSON.stringify(name)}${version === undefined ? "" : ` v${version}`} (the stack's: ${compiled.names.join(", ") || "none"}; GET /v1/workflows lists every one this tenant may start)`,
    );
  return found;
}

/**
 * 400 naming every way `input` does not fit the workflow's declared input, or a run input's
 * bounds (its size and nesting: it is copied into the run's state and every step's request),
 * which a declared input leaves open to fields of its own.
 */
export function checkRunInput(definition: WorkflowDefinition, input: unknown): void {
  const bounds = RunInput.safeParse(input);
  const problems = [
    ...(bounds.success ? [] : bounds.error.issues.map((i) => `(input): ${i.message}`)),
    ...runInputProblems(definition.input, input),
  ];
  if (problems.length > 0)
    fail(
      "invalid_request",
      `the body does not fit workflow ${definition.name} v${definition.version}'s input`,
      { errors: problems.map((line) => issue(line, "(body)")) },
    );
}

function registryOf(workflows: FrontDoorWorkflows | undefined): FrontDoorWorkflows {
  if (!workflows) fail("not_served", "this front door keeps no workflow registry");
  return workflows;
}

/** `PUT /v1/workflows/{workflow_name}`: register a definition in the caller's tenant. */
export async function putTenantWorkflow(
  request: HttpRequest,
  caller: Caller,
  name: string,
  workflows: FrontDoorWorkflows | undefined,
): Promise<HttpResponse> {
  const { registry, stepRoles } = registryOf(workflows);
  const taken = compiledOf(workflows).names;
  const body = bodyOf(request, z.record(z.string(), z.unknown()), MAX_DEFINITION_BYTES);
  if (body.name !== name)
    fail(
      "invalid_request",
      `the path names workflow ${JSON.stringify(name)}, the body ${JSON.stringify(body.name)}: they must be the same`,
      { errors: [{ path: "(body).name", message: `must be ${JSON.stringify(name)}` }] },
    );
  let put: Awaited<ReturnType<typeof putWorkflow>>;
  try {
    put = await putWorkflow(registry, caller.tenantId, body, {
      roles: stepRoles,
      reserved: taken,
    });
  } catch (error) {
    if (!(error instanceof WorkflowDefinitionError)) throw error;
    refusePut(error, stepRoles);
  }
  const { definition, outcome } = put;
  const answer = {
    outcome,
    name: definition.name,
    version: definition.version,
    scope: "tenant",
    links: { workflow: `/v1/workflows/${definition.name}` },
  };
  return json(outcome === "stored" ? 201 : 200, answer, {
    location: `/v1/workflows/${definition.name}`,
  });
}

/** A refused put: 409 when the version is taken by another definition, else 400 with every problem. */
function refusePut(error: WorkflowDefinitionError, stepRoles: readonly string[]): never {
  if (error.code === "workflow.version_taken") fail("version_taken", error.message);
  const listed = (error.details.problems as { code: string; message: string }[] | undefined) ?? [
    { code: error.code, message: error.message },
  ];
  const errors = listed.map((p) => {
    const { path, message } = issue(p.message, "(body)");
    return { path: path === "(body)" ? path : `(body).${path}`, message: `${message} [${p.code}]` };
  });
  const roles = listed.some((p) => p.code === "dag.unknown_role")
    ? ` (this stack's step roles: ${stepRoles.join(", ") || "none"})`
    : "";
  fail(
    "invalid_request",
    `the definition is refused: ${listed.length} problem(s), nothing stored${roles}`,
    { errors },
  );
}

/** A workflow as the front door shows it: no tenant (a tenant sees its own only). */
function shownToTenant({ tenant: _own, ...workflow }: ListedWorkflow) {
  return workflow;
}

/** `GET /v1/workflows`: every workflow the caller's tenant sees. */
export async function listTenantWorkflows(
  caller: Caller,
  workflows: FrontDoorWorkflows | undefined,
): Promise<HttpResponse> {
  const listed = await listWorkflows(compiledOf(workflows), workflows?.registry, [caller.tenantId]);
  return json(200, { workflows: listed.map(shownToTenant) });
}

/**
 * `GET /v1/workflows/{workflow_name}[?version=N]`: what a start by that name runs (or version N
 * of it), its scope and its versions.
 */
export async function getTenantWorkflow(
  caller: Caller,
  name: string,
  version: number | undefined,
  workflows: FrontDoorWorkflows | undefined,
): Promise<HttpResponse> {
  const {
    definition,
    version: _shown,
    ...listed
  } = await tenantWorkflow(workflows, caller.tenantId, name, version);
  return json(200, { ...shownToTenant(listed), definition });
}
