import { tenantOf } from "../../../schemas";
import type { WorkflowRejected } from "../../../schemas/events/workflow";
import type {
  WorkflowChildCancelRequested,
  WorkflowChildEnded,
  WorkflowChildStartRequested,
} from "../../../schemas/events/workflow-child";
import { onChildEnded } from "../../core/dag/child";
import type { WorkflowDefinition } from "../../core/dag/definition";
import { WorkflowDefinitionError } from "../../core/dag/errors";
import { runInputProblems } from "../../core/dag/input";
import { checkPlan, MAX_PLAN_BYTES, type PlanRefusal } from "../../core/dag/plan";
import { cancelRun } from "../../core/dag/rerun";
import { PermanentError } from "../../core/errors";
import { applyTransition } from "./apply";
import { beginRun } from "./begin";
import type { StartDefinition } from "./catalog";
import { definitionOf, type OrchestratorDecision, type RunContext } from "./context";
import { askApproval, writersIn } from "./plan-approval";

/**
 * Child runs: a child node of a run (the parent) runs another workflow as a run of its own
 * (`dag_run/<child_run_id>`), which the orchestrator starts, cancels and hears the end of.
 *
 * - The DAG's `child.start` becomes `workflow.child.start.requested` on the parent's stream,
 *   ordered by the child's run id: the workflow (by name and version, or the plan an upstream
 *   produced), and the child's request, the parent's input with the node's input over it, checked
 *   against the child workflow's declared input. The child's start is idempotent on its run id (one per
 *   assignment of the node): a start sent again finds the run and changes nothing. It finds the
 *   workflow as an operator's start of the parent's tenant does (compiled in, the tenant's own,
 *   every tenant's), checks a plan (functions/core/dag/plan.ts) and the stack's step roles, and
 *   keeps its parent (`parent`) and a plan (`plan`) in its state.
 * - A refused child (an unknown workflow, an invalid plan, a role not allowed, a request that does
 *   not fit the child workflow's input) never runs: `workflow.rejected` on its stream, and the parent's node
 *   fails with the refusal's code and message.
 * - A plan that names roles that write waits for a person's approval before it starts
 *   (./plan-approval).
 * - The DAG's `child.cancel` becomes `workflow.child.cancel.requested`: a child still RUNNING is
 *   cancelled as an operator's cancel would, and its own children with it.
 * - A child run that ends tells its parent `workflow.child.ended` (ordered by the parent's run id,
 *   with the parent's other events), which goes to `onChildEnded`; an end the parent no longer
 *   waits for (the node re-run, the parent cancelled) is ignored by the DAG's delivery gate.
 */

/**
 * Start a child run; nothing when it exists. Refused (the parent's node fails) when its workflow
 * is unknown, its plan is invalid or names what its tenant's plans may not, the stack cannot run
 * it, or its request does not fit the child workflow's declared input. A plan that names roles
 * that write starts only with a person's approval: without one, its parent is asked for it
 * (./plan-approval).
 */
export async function startChild(
  context: RunContext,
  request: WorkflowChildStartRequested,
): Promise<OrchestratorDecision> {
  const { state, stepRoles } = context;
  if (state) return {};
  const found = await childDefinition(context, request);
  if ("refusal" in found) return refused(request, found.refusal);
  const def = found.definition;
  const notRunnable = stepRoles.refusalOf(def);
  if (notRunnable) return refused(request, notRunnable);
  const problems = runInputProblems(def.input, request.request);
  if (problems.length > 0)
    return refused(request, {
      code: "workflow.invalid_child_input",
      message: `the child's request (the parent's input with the node's input over it) does not fit workflow ${def.name} v${def.version}'s input: ${problems.join("; ")}`,
    });
  const writes = request.plan === undefined ? [] : writersIn(def, stepRoles);
  if (writes.length > 0 && request.approval === undefined) return askApproval(request, def, writes);
  const parent = {
    run_id: request.parent_run_id,
    node_id: request.parent_node_id,
    generation: request.parent_generation,
  };
  const start = { runId: request.run_id, workflow: def.name, input: request.request };
  return beginRun(context, found, start, {
    parent,
    ...(request.plan === undefined ? {} : { plan: def }),
  });
}

/** The child's definition: the workflow it names for the tenant, or its plan checked. */
async function childDefinition(
  { event, workflows }: RunContext,
  request: WorkflowChildStartRequested,
): Promise<StartDefinition | { readonly refusal: PlanRefusal }> {
  const tenant = tenantOf(event);
  const { workflow_name: name, workflow_version: version } = request;
  if (name === undefined) return planDefinition(workflows, tenant, request);
  let found: StartDefinition | undefined;
  try {
    found = await workflows.forStart(name, tenant, version);
  } catch (error) {
    if (!(error instanceof WorkflowDefinitionError)) throw error;
    return { refusal: { code: error.code, message: error.message } };
  }
  if (found) return found;
  const named = `${name}${version === undefined ? "" : ` v${version}`}`;
  return {
    refusal: {
      code: "workflow.unknown_kind",
      message: `the child's workflow ${named} is not one of ${workflows.names.join(", ")}, nor registered for tenant ${tenant} or for every tenant`,
    },
  };
}

async function planDefinition(
  workflows: RunContext["workflows"],
  tenant: string,
  { plan, plan_bytes }: WorkflowChildStartRequested,
): Promise<StartDefinition | { readonly refusal: PlanRefusal }> {
  if (plan_bytes !== undefined)
    return {
      refusal: {
        code: "workflow.too_large",
        message: `the plan is ${plan_bytes} bytes of JSON; a plan is at most ${MAX_PLAN_BYTES}`,
      },
    };
  if (plan === undefined)
    return {
      refusal: {
        code: "workflow.invalid_plan",
        message: "there is no plan: the upstream's output has nothing at the plan's path",
      },
    };
  const checked = checkPlan(plan, tenant, await workflows.planRoles(tenant));
  if ("refusal" in checked) return checked;
  workflows.adopt(checked.definition);
  return { definition: checked.definition };
}

/** A child that does not run: its refusal on its stream, and its end to its parent. */
function refused(
  request: WorkflowChildStartRequested,
  { code, message }: PlanRefusal,
): OrchestratorDecision {
  const text = message.slice(0, 4096);
  const rejected: WorkflowRejected = {
    run_id: request.run_id,
    request: "start",
    code,
    message: text,
    parent_run_id: request.parent_run_id,
    parent_node_id: request.parent_node_id,
  };
  const ended: WorkflowChildEnded = {
    run_id: request.parent_run_id,
    node_id: request.parent_node_id,
    generation: request.parent_generation,
    child_run_id: request.run_id,
    status: "FAILED",
    error: { code: code.slice(0, 128), message: text, error_class: "business" },
  };
  return {
    emit: [
      { type: "workflow.rejected", payload: rejected, orderKey: request.run_id },
      { type: "workflow.child.ended", payload: ended, orderKey: request.parent_run_id },
    ],
  };
}

/**
 * Cancel a child run whose node's assignment no longer counts, as an operator's cancel does (its
 * own children get theirs). Nothing when it never ran or has ended.
 */
export function cancelChild(
  context: RunContext,
  { parent_run_id, reason }: WorkflowChildCancelRequested,
): OrchestratorDecision {
  const { state } = context;
  if (state?.run.status !== "RUNNING") return {};
  const transition = cancelRun(state.run, definitionOf(context, state));
  return applyTransition(context, state, transition, {
    requested_by: "orchestrator",
    reason: `its node in run ${parent_run_id} no longer runs it (${reason})`,
  });
}

/**
 * A child run's end, for its parent: `onChildEnded` for the node's assignment it names. The
 * message comes on the child's stream (its `child_run_id`).
 */
export async function childEnded(
  context: RunContext,
  ended: WorkflowChildEnded,
): Promise<OrchestratorDecision> {
  const { state, event, capacityFor } = context;
  const { run_id, node_id, generation, child_run_id, status, outputs, error } = ended;
  if (event.aggregate.id !== child_run_id)
    throw new PermanentError(
      "workflow.aggregate_mismatch",
      `workflow.child.ended names child run ${child_run_id} but comes on ${event.aggregate.type}/${event.aggregate.id}`,
    );
  if (!state)
    throw new PermanentError(
      "workflow.unknown_run",
      `workflow.child.ended for run ${run_id}, which was never started`,
      { details: { run_id, node_id } },
    );
  const def: WorkflowDefinition = definitionOf(context, state);
  const end = {
    status,
    ...(outputs === undefined ? {} : { outputs }),
    ...(error === undefined ? {} : { error }),
  };
  const transition = onChildEnded(state.run, def, node_id, generation, end, await capacityFor(def));
  return applyTransition(context, state, transition);
}
