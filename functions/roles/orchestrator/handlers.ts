import { tenantOf } from "../../../schemas";
import type {
  NodeConfirmExpired,
  WorkflowConfirmRequested,
} from "../../../schemas/events/agent-run";
import type { StepCompleted, StepFailed } from "../../../schemas/events/step";
import type {
  NodeCompleted,
  NodeFailed,
  NodeLeaseExpired,
  WorkflowReleaseRequested,
  WorkflowRerunRequested,
  WorkflowStartRequested,
} from "../../../schemas/events/workflow";
import type { WorkflowCancelRequested } from "../../../schemas/events/workflow-cancel";
import type { WorkflowDefinition } from "../../core/dag/definition";
import {
  onItemCompleted,
  onItemFailed,
  onNodeCompleted,
  onNodeFailed,
  redeliver,
  release,
} from "../../core/dag/engine";
import { WorkflowDefinitionError } from "../../core/dag/errors";
import { runInputProblems } from "../../core/dag/input";
import { cancelRun, rerunFrom } from "../../core/dag/rerun";
import type { Capacity, DagRun, NodeError, Transition } from "../../core/dag/run";
import { PermanentError } from "../../core/errors";
import { ownAnswerTypes, type StepRoleTable } from "../../core/steps";
import { confirmExpired, confirmNode, nodeBlocked, nodeStarted } from "./agent";
import { applyTransition } from "./apply";
import { beginRun } from "./begin";
import type { StartDefinition } from "./catalog";
import { cancelChild, childEnded, startChild } from "./children";
import {
  definitionOf,
  type EventHandler,
  existing,
  fromAgent,
  type Handle,
  type OrchestratorDecision,
  type RunContext,
  refusing,
  rejection,
  toRun,
} from "./context";
import { failItems, redeliverItems, runningItems } from "./items";
import { dueAtOf, extendLease, leaseOutlivesReport, mayRedeliver } from "./leases";
import { approvalRequested, decidePlan, planApprovalExpired } from "./plan-approval";
import { reset, resolve } from "./resolve";
import { currentPlanApproval, personWaitSince } from "./state";
import { signal, waitExpired } from "./wait-nodes";
import { dependencyExpired } from "./waits";

/**
 * What the orchestrator does with each event type it subscribes to: one handler per type, which
 * gets the payload as the registry typed (and the pipeline validated) it for that type.
 */

/** Every event type the orchestrator handles, in its subscription order. */
export const HANDLERS: Readonly<Record<string, EventHandler>> = {
  "workflow.start.requested": toRun("workflow.start.requested", start),
  "workflow.rerun.requested": toRun("workflow.rerun.requested", rerun),
  "workflow.reset.requested": toRun("workflow.reset.requested", reset),
  "workflow.resolve.requested": toRun("workflow.resolve.requested", resolve),
  "workflow.release.requested": toRun("workflow.release.requested", releaseHeld),
  "workflow.cancel.requested": toRun("workflow.cancel.requested", cancel),
  "node.lease.expired": toRun("node.lease.expired", leaseExpired),
  "node.started": toRun("node.started", nodeStarted),
  "node.blocked": fromAgent("node.blocked", nodeBlocked),
  "workflow.confirm.requested": toRun("workflow.confirm.requested", confirm),
  "node.confirm.expired": toRun("node.confirm.expired", confirmDeadline),
  "node.dependency.expired": toRun("node.dependency.expired", dependencyExpired),
  "workflow.signal.requested": toRun("workflow.signal.requested", signal),
  "node.wait.expired": toRun("node.wait.expired", waitExpired),
  "workflow.child.start.requested": fromAgent("workflow.child.start.requested", startChild),
  "workflow.child.cancel.requested": fromAgent("workflow.child.cancel.requested", cancelChild),
  "workflow.child.ended": fromAgent("workflow.child.ended", childEnded),
  "workflow.child.approval.requested": fromAgent(
    "workflow.child.approval.requested",
    approvalRequested,
  ),
  "node.heartbeat": toRun("node.heartbeat", (context, payload) => {
    const { state, leasing } = context;
    const next = extendLease(state, state && definitionOf(context, state), payload, leasing);
    return next ? { state: next, dueAt: dueAtOf(next, leasing) } : {};
  }),
  // Every step role's answers, naming the role (a role with its own answer types: handlersFor).
  "step.completed": fromAgent("step.completed", (context, payload: StepCompleted) =>
    completedBy(payload.role)(context, payload),
  ),
  "step.failed": fromAgent("step.failed", (context, payload: StepFailed) =>
    failedBy(payload.role)(context, payload),
  ),
};

/**
 * The handlers of an orchestrator whose stack has these step roles: HANDLERS, and the answers of
 * each role that spells its own (`<stem>.completed` / `<stem>.failed`, its entry's `answers`),
 * taken as `step.completed` / `step.failed` from that role.
 */
export function handlersFor(table: StepRoleTable): Readonly<Record<string, EventHandler>> {
  // Their types are the stack's, known at run time only: typed as the kit's answers, whose
  // node fields they share.
  const own = ownAnswerTypes(table).map(({ type, role, completed }) => [
    type,
    completed
      ? fromAgent(type as "step.completed", completedBy(role))
      : fromAgent(type as "step.failed", failedBy(role)),
  ]);
  return { ...HANDLERS, ...Object.fromEntries(own) };
}

/**
 * A person's answer to a node that waits for one: the approval of its plan (./plan-approval),
 * else the confirmation its BLOCKED agent asked for (./agent). An answer given to an earlier wait
 * of the node (`waiting_since`) is refused: it must not approve what its author never saw.
 */
function confirm(
  context: RunContext,
  payload: WorkflowConfirmRequested,
): OrchestratorDecision | Promise<OrchestratorDecision> {
  const { state } = context;
  const { run_id, node_id, waiting_since } = payload;
  const since = state && personWaitSince(state, node_id);
  if (waiting_since !== undefined && since !== undefined && since !== waiting_since)
    throw rejection(
      "confirm",
      run_id,
      node_id,
      "workflow.confirm_stale",
      `the answer was given to what node ${node_id} of run ${run_id} waited for since ${waiting_since}; it now waits for something else, since ${since}`,
    );
  const approval = state && currentPlanApproval(state, payload.node_id);
  return approval ? decidePlan(context, state, approval, payload) : confirmNode(context, payload);
}

/** The deadline of what a node waits for passed: its plan's approval, else its agent's confirmation. */
function confirmDeadline(
  context: RunContext,
  report: NodeConfirmExpired,
): OrchestratorDecision | Promise<OrchestratorDecision> {
  const { state } = context;
  return state && currentPlanApproval(state, report.node_id)
    ? planApprovalExpired(context, report)
    : confirmExpired(context, report);
}

/**
 * A new run of the requested workflow; a start for a run that exists changes nothing. Refused
 * (`workflow.rejected`) when the orchestrator knows no such workflow, when a node of it names a
 * role that is not a step role of the stack, or when a map node's role does not carry out map
 * items (a role that takes its step commands itself and does not declare `steps.items`).
 */
async function start(
  context: RunContext,
  { run_id, workflow_name: workflow, request }: WorkflowStartRequested,
): Promise<OrchestratorDecision> {
  const { state, stepRoles } = context;
  if (state) return {};
  const found = await startDefinition(context, run_id, workflow);
  const def = found.definition;
  const refused = stepRoles.refusalOf(def);
  if (refused) throw rejection("start", run_id, refused.nodeId, refused.code, refused.message);
  const problems = runInputProblems(def.input, request);
  if (problems.length > 0)
    throw rejection(
      "start",
      run_id,
      undefined,
      "workflow.invalid_input",
      `workflow ${def.name} v${def.version} does not take this input: ${problems.join("; ")}`,
    );
  return beginRun(context, found, { runId: run_id, workflow, input: request });
}

/**
 * The definition a start names, for the start's tenant; refused (`workflow.rejected`) when there
 * is none, or when the registered one no longer passes the language's checks.
 */
async function startDefinition(
  { event, workflows }: RunContext,
  runId: string,
  workflow: string,
): Promise<StartDefinition> {
  const tenant = tenantOf(event);
  let found: StartDefinition | undefined;
  try {
    found = await workflows.forStart(workflow, tenant);
  } catch (error) {
    if (error instanceof WorkflowDefinitionError)
      throw rejection("start", runId, undefined, error.code, error.message);
    throw error;
  }
  if (found) return found;
  throw rejection(
    "start",
    runId,
    undefined,
    "workflow.unknown_kind",
    `workflow ${JSON.stringify(workflow)} is not one of ${workflows.names.join(", ") || "the stack's (it has none)"}, nor registered for tenant ${tenant} or for every tenant`,
  );
}

/**
 * Re-run any node of the run and everything below it, under a new generation; a re-run the DAG
 * refuses becomes workflow.rejected.
 */
async function rerun(
  context: RunContext,
  { run_id, node_id }: WorkflowRerunRequested,
): Promise<OrchestratorDecision> {
  const current = existing(context.state, run_id, "rerun", node_id);
  const def = definitionOf(context, current);
  const capacity = await context.capacityFor(def);
  const transition = refusing("rerun", run_id, node_id, () =>
    rerunFrom(current.run, def, node_id, capacity),
  );
  return applyTransition(context, current, transition);
}

/**
 * A release pass for the nodes backpressure held back. When it releases nothing while nodes stay
 * held, the state is still written with a new due time, so the sweeper nudges the run again.
 */
async function releaseHeld(
  context: RunContext,
  { run_id }: WorkflowReleaseRequested,
): Promise<OrchestratorDecision> {
  const current = existing(context.state, run_id, "release");
  if (current.run.status !== "RUNNING") return {};
  const def = definitionOf(context, current);
  const transition = release(current.run, def, await context.capacityFor(def));
  const decision = applyTransition(context, current, transition);
  if (decision.state === undefined && current.held.length > 0)
    return { state: current, dueAt: dueAtOf(current, context.leasing) };
  return decision;
}

/**
 * Cancel a RUNNING run: every node that has not ended is CANCELLED, the agent of each RUNNING node
 * gets `<role>.cancel.requested`, and `workflow.cancelled` carries the result so far with who asked
 * and why. Idempotent: a run already CANCELLED changes nothing and emits nothing; a run that ended
 * otherwise (COMPLETED, PARTIAL, FAILED) is refused with `workflow.rejected`
 * (code workflow.run_ended), as is an unknown run (workflow.unknown_run).
 */
function cancel(
  context: RunContext,
  { run_id, reason, requested_by }: WorkflowCancelRequested,
): OrchestratorDecision {
  const current = existing(context.state, run_id, "cancel");
  const { status } = current.run;
  if (status === "CANCELLED") return {};
  if (status !== "RUNNING")
    throw rejection(
      "cancel",
      run_id,
      undefined,
      "workflow.run_ended",
      `run ${run_id} already ended ${status}; there is nothing left to cancel`,
    );
  const transition = cancelRun(current.run, definitionOf(context, current));
  return applyTransition(context, current, transition, {
    requested_by,
    ...(reason === undefined ? {} : { reason }),
  });
}

/**
 * The sweeper found a node's lease expired: its outcome is unknown, so the same assignment is sent
 * again (a fresh queued lease), up to the policy's redeliveries; after that, a failure of the node
 * (transient, agent_run.lease_expired). Gated on the generation like any delivery, and ignored
 * when a heartbeat extended the lease past the report. For a map node, the same for each item
 * still RUNNING (./items).
 */
async function leaseExpired(
  context: RunContext,
  report: NodeLeaseExpired,
): Promise<OrchestratorDecision> {
  const { state, event, leasing, capacityFor } = context;
  if (!state || leaseOutlivesReport(state, report, leasing.now)) return {};
  const { node_id, generation, expired_at } = report;
  const def = definitionOf(context, state);
  const isMap = def.nodes.some((n) => n.id === node_id && n.map);
  const items = isMap ? runningItems(state.run, node_id, generation) : [];
  if (isMap && items.length === 0) return {};
  if (mayRedeliver(state, report, leasing.policy))
    return applyTransition(
      context,
      state,
      isMap
        ? redeliverItems(state.run, def, node_id, generation, items)
        : redeliver(state.run, def, node_id, generation),
    );
  const redeliveries = state.leases?.[node_id]?.redeliveries ?? 0;
  const error: NodeError = {
    code: "agent_run.lease_expired",
    error_class: "transient",
    message: `lease of node ${node_id} (generation ${generation}) expired${expired_at ? ` at ${expired_at}` : ""}${redeliveries > 0 ? `, after the assignment was sent ${redeliveries} more time(s)` : ""}; reported by ${event.producer}`,
  };
  const capacity = await capacityFor(def);
  const transition = isMap
    ? failItems(state.run, def, node_id, generation, items, error, capacity)
    : onNodeFailed(state.run, def, node_id, error, generation, capacity);
  return applyTransition(context, state, transition);
}

/** The map item an answer names (a step role's, for an item of a map node). */
type ItemAnswer = { readonly item?: number };

/**
 * An agent's `<role>.completed` (or a step role's `step.completed`): onNodeCompleted with the
 * payload's output and generation, onItemCompleted when it names a map item. The output is the
 * DAG's node output whatever its role's schema (the registry checked it against that), so the
 * completion is read as any role's.
 */
function completedBy(agent: string): Handle<NodeCompleted & ItemAnswer> {
  return (context, { run_id, node_id, generation, output, item }) =>
    settleReported(context, agent, run_id, node_id, (run, def, capacity) =>
      item === undefined
        ? onNodeCompleted(run, def, node_id, output, generation, capacity)
        : onItemCompleted(run, def, node_id, item, output, generation, capacity),
    );
}

/**
 * An agent's `<role>.failed` (or `step.failed`): onNodeFailed with the payload's error and
 * generation, onItemFailed when it names a map item.
 */
function failedBy(agent: string): Handle<NodeFailed & ItemAnswer> {
  return (context, { run_id, node_id, generation, error, item }) =>
    settleReported(context, agent, run_id, node_id, (run, def, capacity) =>
      item === undefined
        ? onNodeFailed(run, def, node_id, nodeError(error), generation, capacity)
        : onItemFailed(run, def, node_id, item, nodeError(error), generation, capacity),
    );
}

/**
 * Apply an agent's outcome. The run must exist (else workflow.unknown_run) and the node must be
 * one the reporting agent executes (else workflow.role_mismatch); duplicate, stale or
 * not-running deliveries are ignored by the DAG and change nothing.
 */
async function settleReported(
  context: RunContext,
  agent: string,
  runId: string,
  nodeId: string,
  step: (run: DagRun, def: WorkflowDefinition, capacity: Capacity) => Transition,
): Promise<OrchestratorDecision> {
  const { state, event, capacityFor } = context;
  if (!state)
    throw new PermanentError(
      "workflow.unknown_run",
      `${event.event_type} for run ${runId}, which was never started`,
      { details: { run_id: runId, node_id: nodeId } },
    );
  const def = definitionOf(context, state);
  const node = def.nodes.find((n) => n.id === nodeId);
  if (node && node.role !== agent)
    throw new PermanentError(
      "workflow.role_mismatch",
      `${event.event_type} reports node ${nodeId} of run ${runId}, which the ${node.role} agent executes, not ${agent}`,
      { details: { run_id: runId, node_id: nodeId, role: node.role } },
    );
  const transition = step(state.run, def, await capacityFor(def));
  return applyTransition(context, state, transition);
}

function nodeError(error: NodeFailed["error"]): NodeError {
  return { code: error.code, message: error.message, error_class: error.errorClass };
}
