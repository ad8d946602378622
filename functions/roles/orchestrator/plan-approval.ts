import type {
  NodeConfirmExpired,
  WorkflowConfirmRequested,
} from "../../../schemas/events/agent-run";
import {
  MAX_APPROVAL_NODES,
  type WorkflowChildApprovalRequested,
  type WorkflowChildStartRequested,
} from "../../../schemas/events/workflow-child";
import { type ApprovalDecision, type ApprovalVerdict, ruleOnApproval } from "../../core/approval";
import { childStartOf, onChildEnded } from "../../core/dag/child";
import type { NodeDefinition, WorkflowDefinition } from "../../core/dag/definition";
import { dependencyTimeoutOf } from "../../core/dag/timeout";
import { byString } from "../../core/dag/values";
import { PermanentError } from "../../core/errors";
import { withStep } from "./agent";
import { applyTransition } from "./apply";
import type { StepRoles } from "./catalog";
import { childCommand } from "./child-commands";
import { definitionOf, type OrchestratorDecision, type RunContext, rejection } from "./context";
import { dueAtOf } from "./leases";
import { type OrchestratorState, type PlanApproval, pendingPlanApproval } from "./state";

/**
 * A plan that asks for a write runs only with a person's approval. A plan (an upstream's output
 * that a child node runs, functions/core/dag/plan.ts) asks for a write when it names a step role
 * that writes: one whose role module uses an integration of `access: "write"` (the step roles'
 * table says which, `writes`: functions/core/steps.ts). Such a plan passes every check of a child
 * start (the language, the tenant's allowed roles, the stack's step roles, the input) and then:
 *
 * - the child's start does not start it: it tells the parent
 *   `workflow.child.approval.requested` (the plan's nodes and the roles of it that write);
 * - the parent's node waits (`plan_approvals` in its state) for the approval primitive's answer
 *   (functions/core/approval.ts), `workflow.confirm.requested` on its node (`agentbus approve
 *   <run> --step <node>`), until its deadline: the node's dependency timeout (the node's, its
 *   workflow's, else the orchestrator's), from when it began to wait;
 * - approved, the parent sends the child's start again, with the approval: the child starts (once:
 *   a start is idempotent on the child's run id, and the same answer again changes nothing);
 *   rejected, the node fails (`workflow.plan_rejected`); with no answer by the deadline the sweeper
 *   reports `node.confirm.expired` and the node fails (`workflow.plan_approval_expired`).
 *
 * A cancel of the parent (or a re-run of the node) ends the wait with the node's assignment: an
 * answer after it is refused, and the child never starts. A plan that writes nothing starts at
 * once.
 */

export const PLAN_REJECTED = "workflow.plan_rejected";
export const PLAN_APPROVAL_EXPIRED = "workflow.plan_approval_expired";

/** The roles of `def` that write (the stack's step roles say which), each once, by name. */
export function writersIn(
  def: WorkflowDefinition,
  stepRoles: StepRoles,
): WorkflowChildApprovalRequested["writes"] {
  const roles = [...new Set(def.nodes.flatMap((n) => (n.role === undefined ? [] : [n.role])))];
  return roles.sort(byString).flatMap((role) => {
    const integrations = stepRoles.table[role]?.writes ?? [];
    return integrations.length > 0 ? [{ role, integrations: [...integrations] }] : [];
  });
}

/**
 * The answer of a child's start whose plan writes and carries no approval: its parent is told the
 * plan waits for one (on the child's stream, ordered with the parent's events); the child does
 * not start.
 */
export function askApproval(
  request: WorkflowChildStartRequested,
  def: WorkflowDefinition,
  writes: WorkflowChildApprovalRequested["writes"],
): OrchestratorDecision {
  const payload: WorkflowChildApprovalRequested = {
    run_id: request.parent_run_id,
    node_id: request.parent_node_id,
    generation: request.parent_generation,
    child_run_id: request.run_id,
    plan: {
      name: def.name,
      version: def.version,
      nodes: def.nodes.slice(0, MAX_APPROVAL_NODES).map((node) => ({
        id: node.id,
        runs: runsOf(node),
      })),
      node_count: def.nodes.length,
    },
    writes,
  };
  return {
    emit: [
      {
        type: "workflow.child.approval.requested",
        payload,
        orderKey: request.parent_run_id,
      },
    ],
  };
}

/** What carries out a node, in words: its role, `map <role>`, `wait` or `plan`. */
function runsOf(node: NodeDefinition): string {
  if (node.role !== undefined) return node.map ? `map ${node.role}` : node.role;
  return node.wait ? "wait" : "plan";
}

/**
 * The parent hears that its child node's plan waits for an approval: the node waits until the
 * deadline. Changes nothing when the node no longer runs that assignment, or already waits.
 */
export function approvalRequested(
  context: RunContext,
  asked: WorkflowChildApprovalRequested,
): OrchestratorDecision {
  const { state, event, leasing } = context;
  const { run_id, node_id, generation, child_run_id } = asked;
  if (event.aggregate.id !== child_run_id)
    throw new PermanentError(
      "workflow.aggregate_mismatch",
      `workflow.child.approval.requested names child run ${child_run_id} but comes on ${event.aggregate.type}/${event.aggregate.id}`,
    );
  if (!state)
    throw new PermanentError(
      "workflow.unknown_run",
      `workflow.child.approval.requested for run ${run_id}, which was never started`,
      { details: { run_id, node_id } },
    );
  const node = state.run.nodes[node_id];
  if (state.run.status !== "RUNNING" || node?.state !== "RUNNING") return {};
  if (node.assigned_generation !== generation) return {};
  if (state.plan_approvals?.[node_id]?.generation === generation) return {};
  const { now, policy } = leasing;
  const def = definitionOf(context, state);
  const seconds = dependencyTimeoutOf(def, node_id, policy.dependencySeconds);
  const approval: PlanApproval = {
    generation,
    child_run_id,
    since: now.toISOString(),
    deadline: new Date(now.getTime() + seconds * 1000).toISOString(),
    plan: asked.plan,
    writes: asked.writes,
  };
  const waiting = withApproval(state, node_id, approval);
  const next = withStep(waiting, "node.blocked", node_id, generation, event.event_type, now);
  return { state: next, dueAt: dueAtOf(next, leasing) };
}

/**
 * A person's answer to a plan that waits (`workflow.confirm.requested` on its node): confirmed
 * starts the child with the approval, refused fails the node. The same answer again changes
 * nothing; the other one after an answer is refused (`workflow.plan_decided`).
 */
export async function decidePlan(
  context: RunContext,
  state: OrchestratorState,
  approval: PlanApproval,
  { run_id, node_id, answer, note, requested_by }: WorkflowConfirmRequested,
): Promise<OrchestratorDecision> {
  const verdict: ApprovalVerdict = answer === "confirmed" ? "approve" : "reject";
  const what = `plan ${approval.plan.name} v${approval.plan.version}`;
  const taken = approval.decision && decisionOf(approval.decision);
  const pending = taken
    ? undefined
    : { step: node_id, action: `run ${what}`, since: approval.since };
  const ruling = ruleOnApproval(pending, taken, verdict, node_id);
  if (ruling.kind === "repeat") return {};
  if (ruling.kind === "refuse")
    throw rejection("confirm", run_id, node_id, "workflow.plan_decided", ruling.why);
  const { now } = context.leasing;
  const at = now.toISOString();
  if (verdict === "reject")
    return failNode(
      context,
      state,
      node_id,
      approval,
      PLAN_REJECTED,
      `${requested_by} rejected the ${what} of node ${node_id}${note ? `: ${note}` : ""}`,
    );
  const command = childStartOf(
    state.run,
    definitionOf(context, state),
    node_id,
    approval.generation,
  );
  if (!command) return {};
  const decision = { verdict, by: requested_by, at, ...(note ? { reason: note } : {}) } as const;
  const decided = withApproval(state, node_id, { ...approval, decision });
  const next = withStep(
    decided,
    "node.unblocked",
    node_id,
    approval.generation,
    "workflow.confirm.requested",
    now,
  );
  const approved = { by: requested_by, at, ...(note ? { note } : {}) };
  return {
    state: next,
    emit: [childCommand(state, command, approved)],
    dueAt: dueAtOf(next, context.leasing),
  };
}

/**
 * The sweeper found a plan's approval past its deadline: the node fails. Changes nothing when the
 * plan was decided, the node no longer waits, or the deadline is not the one reported or not yet.
 */
export async function planApprovalExpired(
  context: RunContext,
  report: NodeConfirmExpired,
): Promise<OrchestratorDecision> {
  const { state, leasing } = context;
  const approval = state && pendingPlanApproval(state, report.node_id);
  if (!state || !approval || approval.generation !== report.generation) return {};
  if (approval.deadline !== report.confirm_by) return {};
  if (Date.parse(approval.deadline) > leasing.now.getTime()) return {};
  const { name, version } = approval.plan;
  return failNode(
    context,
    state,
    report.node_id,
    approval,
    PLAN_APPROVAL_EXPIRED,
    `nobody approved the plan ${name} v${version} of node ${report.node_id} (it names roles that write: ${approval.writes.map((w) => w.role).join(", ")}) by ${approval.deadline}, its deadline`,
  );
}

/** The node whose plan waits fails with `code`: its child never ran. */
async function failNode(
  context: RunContext,
  state: OrchestratorState,
  nodeId: string,
  approval: PlanApproval,
  code: string,
  message: string,
): Promise<OrchestratorDecision> {
  const def = definitionOf(context, state);
  const error = { code, message: message.slice(0, 4096), error_class: "business" as const };
  const end = { status: "FAILED" as const, error };
  const capacity = await context.capacityFor(def);
  const transition = onChildEnded(state.run, def, nodeId, approval.generation, end, capacity);
  return applyTransition(context, state, transition);
}

function decisionOf(decision: NonNullable<PlanApproval["decision"]>): ApprovalDecision {
  const { verdict, by, at, reason } = decision;
  return { verdict, by, at, ...(reason === undefined ? {} : { reason }) };
}

function withApproval(
  state: OrchestratorState,
  nodeId: string,
  approval: PlanApproval,
): OrchestratorState {
  return { ...state, plan_approvals: { ...state.plan_approvals, [nodeId]: approval } };
}
