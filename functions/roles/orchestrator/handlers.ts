import {
  type NodeCompleted,
  type NodeFailed,
  type NodeLeaseExpired,
  WORKFLOW_KINDS,
  type WorkflowReleaseRequested,
  type WorkflowRerunRequested,
  type WorkflowStartRequested,
} from "../../../schemas/events/workflow";
import type { WorkflowCancelRequested } from "../../../schemas/events/workflow-cancel";
import type { WorkflowDefinition } from "../../core/dag/definition";
import { onNodeCompleted, onNodeFailed, redeliver, release, startRun } from "../../core/dag/engine";
import { cancelRun, rerunFrom } from "../../core/dag/rerun";
import type { Capacity, DagRun, NodeError, Transition } from "../../core/dag/run";
import { PermanentError } from "../../core/errors";
import {
  CONTENT_AGENTS,
  contentWorkflowFor,
  WorkflowKindSchema,
} from "../content-agents/workflows";
import { confirmExpired, confirmNode, nodeBlocked, nodeStarted } from "./agent";
import { applyTransition } from "./apply";
import {
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
import { dueAtOf, extendLease, leaseOutlivesReport, mayRedeliver } from "./leases";
import { reset, resolve } from "./resolve";
import { definitionOf, type OrchestratorState } from "./state";
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
  "workflow.confirm.requested": toRun("workflow.confirm.requested", confirmNode),
  "node.confirm.expired": toRun("node.confirm.expired", confirmExpired),
  "node.dependency.expired": toRun("node.dependency.expired", dependencyExpired),
  "node.heartbeat": toRun("node.heartbeat", ({ state, leasing }, payload) => {
    const next = extendLease(state, state && definitionOf(state), payload, leasing);
    return next ? { state: next, dueAt: dueAtOf(next, leasing) } : {};
  }),
  ...Object.fromEntries(
    CONTENT_AGENTS.flatMap(({ agent, completed, failed }) => [
      [completed, fromAgent(completed, completedBy(agent))],
      [failed, fromAgent(failed, failedBy(agent))],
    ]),
  ),
};

/** A new run of the requested workflow; a start for a run that exists changes nothing. */
async function start(
  { state, event, leasing, capacityFor }: RunContext,
  { run_id, workflow_name: workflow, request }: WorkflowStartRequested,
): Promise<OrchestratorDecision> {
  if (state) return {};
  const kind = WorkflowKindSchema.safeParse(workflow);
  if (!kind.success)
    throw rejection(
      "start",
      run_id,
      undefined,
      "workflow.unknown_kind",
      `workflow ${JSON.stringify(workflow)} is not one of ${WORKFLOW_KINDS.join(", ")}`,
    );
  const def = contentWorkflowFor({ kind: kind.data });
  const transition = startRun(def, run_id, request, await capacityFor(def));
  const begun: OrchestratorState = {
    workflow: kind.data,
    run: transition.run,
    held: [],
    timeline: [],
    leases: {},
    origin: { correlation_id: event.correlation_id, task_id: event.task_id },
    ...(event.tenant_id === undefined ? {} : { tenant_id: event.tenant_id }),
  };
  return applyTransition(begun, transition, event, leasing);
}

/**
 * Re-run any node of the run and everything below it, under a new generation; a re-run the DAG
 * refuses becomes workflow.rejected.
 */
async function rerun(
  { state, event, leasing, capacityFor }: RunContext,
  { run_id, node_id }: WorkflowRerunRequested,
): Promise<OrchestratorDecision> {
  const current = existing(state, run_id, "rerun", node_id);
  const def = definitionOf(current);
  const capacity = await capacityFor(def);
  const transition = refusing("rerun", run_id, node_id, () =>
    rerunFrom(current.run, def, node_id, capacity),
  );
  return applyTransition(current, transition, event, leasing);
}

/**
 * A release pass for the nodes backpressure held back. When it releases nothing while nodes stay
 * held, the state is still written with a new due time, so the sweeper nudges the run again.
 */
async function releaseHeld(
  { state, event, leasing, capacityFor }: RunContext,
  { run_id }: WorkflowReleaseRequested,
): Promise<OrchestratorDecision> {
  const current = existing(state, run_id, "release");
  if (current.run.status !== "RUNNING") return {};
  const def = definitionOf(current);
  const transition = release(current.run, def, await capacityFor(def));
  const decision = applyTransition(current, transition, event, leasing);
  if (decision.state === undefined && current.held.length > 0)
    return { state: current, dueAt: dueAtOf(current, leasing) };
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
  { state, event, leasing }: RunContext,
  { run_id, reason, requested_by }: WorkflowCancelRequested,
): OrchestratorDecision {
  const current = existing(state, run_id, "cancel");
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
  const transition = cancelRun(current.run, definitionOf(current));
  return applyTransition(current, transition, event, leasing, {
    requested_by,
    ...(reason === undefined ? {} : { reason }),
  });
}

/**
 * The sweeper found a node's lease expired: its outcome is unknown, so the same assignment is sent
 * again (a fresh queued lease), up to the policy's redeliveries; after that, a failure of the node
 * (transient, agent_run.lease_expired). Gated on the generation like any delivery, and ignored
 * when a heartbeat extended the lease past the report.
 */
async function leaseExpired(
  { state, event, leasing, capacityFor }: RunContext,
  report: NodeLeaseExpired,
): Promise<OrchestratorDecision> {
  if (!state || leaseOutlivesReport(state, report, leasing.now)) return {};
  const { node_id, generation, expired_at } = report;
  const def = definitionOf(state);
  if (mayRedeliver(state, report, leasing.policy))
    return applyTransition(state, redeliver(state.run, def, node_id, generation), event, leasing);
  const redeliveries = state.leases?.[node_id]?.redeliveries ?? 0;
  const error: NodeError = {
    code: "agent_run.lease_expired",
    error_class: "transient",
    message: `lease of node ${node_id} (generation ${generation}) expired${expired_at ? ` at ${expired_at}` : ""}${redeliveries > 0 ? `, after the assignment was sent ${redeliveries} more time(s)` : ""}; reported by ${event.producer}`,
  };
  const transition = onNodeFailed(
    state.run,
    def,
    node_id,
    error,
    generation,
    await capacityFor(def),
  );
  return applyTransition(state, transition, event, leasing);
}

/**
 * An agent's `<role>.completed`: onNodeCompleted with the payload's output and generation. The
 * output is the DAG's node output whatever its role's schema (the registry checked it against
 * that), so the completion is read as any role's.
 */
function completedBy(agent: string): Handle<NodeCompleted> {
  return (context, { run_id, node_id, generation, output }) =>
    settleReported(context, agent, run_id, node_id, (run, def, capacity) =>
      onNodeCompleted(run, def, node_id, output, generation, capacity),
    );
}

/** An agent's `<role>.failed`: onNodeFailed with the payload's error and generation. */
function failedBy(agent: string): Handle<NodeFailed> {
  return (context, { run_id, node_id, generation, error }) =>
    settleReported(context, agent, run_id, node_id, (run, def, capacity) =>
      onNodeFailed(run, def, node_id, nodeError(error), generation, capacity),
    );
}

/**
 * Apply an agent's outcome. The run must exist (else workflow.unknown_run) and the node must be
 * one the reporting agent executes (else workflow.role_mismatch); duplicate, stale or
 * not-running deliveries are ignored by the DAG and change nothing.
 */
async function settleReported(
  { state, event, leasing, capacityFor }: RunContext,
  agent: string,
  runId: string,
  nodeId: string,
  step: (run: DagRun, def: WorkflowDefinition, capacity: Capacity) => Transition,
): Promise<OrchestratorDecision> {
  if (!state)
    throw new PermanentError(
      "workflow.unknown_run",
      `${event.event_type} for run ${runId}, which was never started`,
      { details: { run_id: runId, node_id: nodeId } },
    );
  const def = definitionOf(state);
  const node = def.nodes.find((n) => n.id === nodeId);
  if (node && node.role !== agent)
    throw new PermanentError(
      "workflow.role_mismatch",
      `${event.event_type} reports node ${nodeId} of run ${runId}, which the ${node.role} agent executes, not ${agent}`,
      { details: { run_id: runId, node_id: nodeId, role: node.role } },
    );
  const transition = step(state.run, def, await capacityFor(def));
  return applyTransition(state, transition, event, leasing);
}

function nodeError(error: NodeFailed["error"]): NodeError {
  return { code: error.code, message: error.message, error_class: error.errorClass };
}
