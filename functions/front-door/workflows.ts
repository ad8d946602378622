import * as z from "../../schemas/zod";
import type { WorkflowDefinition } from "../core/dag/definition";
import { WorkflowDefinitionError } from "../core/dag/errors";
import { runInputProblems } from "../core/dag/input";
import { MAX_DEFINITION_BYTES, putWorkflow } from "../core/dag/register";
import { EVERY_TENANT, type WorkflowRegistry } from "../core/dag/registry";
import { WORKFLOW_KINDS } from "../roles/content-agents/events";
import { catalogFor, workflowCatalog } from "../roles/orchestrator/catalog";
import { bodyOf, fail, type HttpRequest, type HttpResponse, issue, json } from "./http";
import type { Caller } from "./identity";

/**
 * The front door's workflows: what a tenant may start and register. A tenant registers a
 * definition in its own scope (`PUT /v1/workflows/{name}`, the checks of `agentbus workflow put`:
 * functions/core/dag/register.ts) and reads its own, the shared ones (put by an operator for
 * every tenant) and the ones compiled into the orchestrator; never another tenant's. A start
 * runs what the orchestrator would run for that tenant and name, and its body must fit the
 * workflow's declared input (functions/core/dag/input.ts).
 */

/** The registry the front door reads and writes, and the stack's step roles a put is checked against. */
export interface FrontDoorWorkflows {
  readonly registry: WorkflowRegistry;
  /** The stack's step roles (every role a registered node names must be one). */
  readonly stepRoles: readonly string[];
}

/** Where a workflow a tenant sees comes from. */
export const WORKFLOW_SCOPES = ["tenant", "shared", "built-in"] as const;
export type WorkflowScopeName = (typeof WORKFLOW_SCOPES)[number];

/** The compiled-in workflows the front door knows: the content workflows. */
const COMPILED = workflowCatalog();

/**
 * The definition a start of `tenant` by `name` runs (compiled in, the tenant's own newest, the
 * shared newest), or 404. A registered definition that no longer passes the language's checks
 * is refused here as the orchestrator would refuse it.
 */
export async function startableDefinition(
  workflows: FrontDoorWorkflows | undefined,
  tenant: string,
  name: string,
): Promise<WorkflowDefinition> {
  let found: { definition: WorkflowDefinition } | undefined;
  try {
    found = await (await catalogFor(COMPILED, workflows?.registry, undefined)).forStart(
      name,
      tenant,
    );
  } catch (error) {
    if (!(error instanceof WorkflowDefinitionError)) throw error;
    fail("invalid_request", `workflow ${name} cannot be started: ${error.message}`);
  }
  if (!found)
    fail(
      "not_found",
      `no workflow ${JSON.stringify(name)} (built in: ${WORKFLOW_KINDS.join(", ")}; GET /v1/workflows lists every one this tenant may start)`,
    );
  return found.definition;
}

/** 400 naming every way `input` does not fit the workflow's declared input. */
export function checkRunInput(definition: WorkflowDefinition, input: unknown): void {
  const problems = runInputProblems(definition.input, input);
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
      reserved: WORKFLOW_KINDS,
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

/** One workflow as the list shows it. */
interface ListedWorkflow {
  readonly name: string;
  readonly scope: WorkflowScopeName;
  readonly versions: readonly number[];
}

/** Every workflow the caller's tenant sees: compiled in, its own, the shared ones. */
export async function listTenantWorkflows(
  caller: Caller,
  workflows: FrontDoorWorkflows | undefined,
): Promise<ListedWorkflow[]> {
  const listed: ListedWorkflow[] = WORKFLOW_KINDS.map((name) => ({
    name,
    scope: "built-in",
    versions: [COMPILED.forStart(name)?.version ?? 1],
  }));
  if (!workflows) return listed;
  for (const [scope, named] of [
    [caller.tenantId, "tenant"],
    [EVERY_TENANT, "shared"],
  ] as const)
    for (const w of await workflows.registry.list(scope))
      listed.push({ name: w.name, scope: named, versions: w.versions });
  return listed;
}

/** `GET /v1/workflows/{workflow_name}`: what a start by that name runs, and its versions. */
export async function getTenantWorkflow(
  caller: Caller,
  name: string,
  workflows: FrontDoorWorkflows | undefined,
): Promise<HttpResponse> {
  const definition = await startableDefinition(workflows, caller.tenantId, name);
  const all = await listTenantWorkflows(caller, workflows);
  const shown = all.find((w) => w.name === name && w.versions.includes(definition.version));
  return json(200, {
    name,
    scope: shown?.scope ?? "built-in",
    versions: shown?.versions ?? [definition.version],
    definition,
  });
}
