import { z } from "zod";
import type { Envelope } from "../../schemas";
import {
  type NodeFailed,
  NodeFailedPayload,
  NodeHeartbeatPayload,
  NodeLeaseExpiredPayload,
  WORKFLOW_KINDS,
  type WorkflowRejected,
  WorkflowReleaseRequestedPayload,
  WorkflowRerunRequestedPayload,
  WorkflowResetRequestedPayload,
  WorkflowStartRequestedPayload,
} from "../../schemas/events/workflow";
import {
  type WorkflowCancelRequested,
  WorkflowCancelRequestedPayload,
} from "../../schemas/events/workflow-cancel";
import type { WorkflowDefinition } from "../core/dag/definition";
import { onNodeCompleted, onNodeFailed, release, startRun } from "../core/dag/engine";
import { DagRequestError } from "../core/dag/errors";
import { cancelRun, rerunFrom } from "../core/dag/rerun";
import type { Capacity, DagRun, NodeError, Transition } from "../core/dag/run";
import { BusinessRejection, PermanentError } from "../core/errors";
import type { Decision } from "../core/pipeline";
import { contentWorkflowFor, ROLE_TABLE, WorkflowKindSchema } from "./content-workflows";
import { applyTransition } from "./orchestrator-apply";
import { dueAtOf, extendLease, type Leasing, leaseOutlivesReport } from "./orchestrator-leases";
import { definitionOf, type OrchestratorState, parseWith } from "./orchestrator-state";

/**
 * What the orchestrator does with each event type it subscribes to: one handler per type, each
 * with the registry's payload schema of its type (the payload is parsed, never cast).
 */

/** What a handler works with: the run's stored state (parsed), the event, leases, capacity. */
export interface RunContext {
  readonly state: OrchestratorState | undefined;
  readonly event: Envelope;
  readonly leasing: Leasing;
  /** Queue depths and the gate threshold for a release pass over `def`'s roles. */
  readonly capacityFor: (def: WorkflowDefinition) => Promise<Capacity>;
}

type OrchestratorDecision = Decision<OrchestratorState>;
export type EventHandler = (context: RunContext) => Promise<OrchestratorDecision>;
type Handle<P> = (
  context: RunContext,
  payload: P,
) => OrchestratorDecision | Promise<OrchestratorDecision>;

/** The payload of an event, parsed with its schema (invalid: orchestrator.invalid_payload). */
export function payloadOf<S extends z.ZodType>(schema: S, event: Envelope): z.output<S> {
  const what = `the payload of ${event.event_type} ${event.event_id}`;
  return parseWith(schema, event.payload, "orchestrator.invalid_payload", what);
}

/**
 * A handler for a message addressed to a run from outside (aggregate dag_run/<run_id>, version 0):
 * its aggregate must be the run its payload names.
 */
function toRun<P extends { run_id: string }>(
  schema: z.ZodType<P>,
  handle: Handle<P>,
): EventHandler {
  return async (context) => {
    const payload = payloadOf(schema, context.event);
    const { event } = context;
    if (event.aggregate.id !== payload.run_id)
      throw new PermanentError(
        "workflow.aggregate_mismatch",
        `${event.event_type} names run ${payload.run_id} in its payload but aggregate ${event.aggregate.type}/${event.aggregate.id}`,
      );
    return handle(context, payload);
  };
}

/** A handler for an agent's outcome (on the stream of its agent run). */
function fromAgent<P>(schema: z.ZodType<P>, handle: Handle<P>): EventHandler {
  return async (context) => handle(context, payloadOf(schema, context.event));
}

/** A completion as the orchestrator reads it: the agent's output is the DAG's node output. */
const NodeCompletedPayload = NodeFailedPayload.omit({ error: true }).extend({
  output: z.unknown(),
});
type NodeCompleted = z.output<typeof NodeCompletedPayload>;

/** Every event type the orchestrator handles, in its subscription order. */
export const HANDLERS: Readonly<Record<string, EventHandler>> = {
  "workflow.start.requested": toRun(WorkflowStartRequestedPayload, start),
  "workflow.rerun.requested": toRun(WorkflowRerunRequestedPayload, rerun),
  "workflow.reset.requested": toRun(WorkflowResetRequestedPayload, reset),
  "workflow.release.requested": toRun(WorkflowReleaseRequestedPayload, releaseHeld),
  "workflow.cancel.requested": toRun(WorkflowCancelRequestedPayload, cancel),
  "node.lease.expired": toRun(NodeLeaseExpiredPayload, leaseExpired),
  "node.heartbeat": toRun(NodeHeartbeatPayload, ({ state, leasing }, payload) => {
    const next = extendLease(state, payload, leasing.now);
    return next ? { state: next, dueAt: dueAtOf(next, leasing) } : {};
  }),
  ...Object.fromEntries(
    Object.entries(ROLE_TABLE).flatMap(([dagRole, { agent, completed, failed }]) => [
      [completed, fromAgent(NodeCompletedPayload, completedBy(dagRole, agent))],
      [failed, fromAgent(NodeFailedPayload, failedBy(dagRole, agent))],
    ]),
  ),
};

/** A new run of the requested workflow; a start for a run that exists changes nothing. */
async function start(
  { state, event, leasing, capacityFor }: RunContext,
  { run_id, workflow, request }: z.output<typeof WorkflowStartRequestedPayload>,
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
  };
  return applyTransition(begun, transition, event, leasing);
}

/** Re-run any node of the run and everything below it, under a new generation. */
function rerun(
  context: RunContext,
  { run_id, node_id }: z.output<typeof WorkflowRerunRequestedPayload>,
): Promise<OrchestratorDecision> {
  return runAgain(context, existing(context.state, run_id, "rerun", node_id), "rerun", node_id);
}

/** The ManualReset of a FAILED node: it and its descendants run again under a new generation. */
function reset(
  context: RunContext,
  { run_id, node_id }: z.output<typeof WorkflowResetRequestedPayload>,
): Promise<OrchestratorDecision> {
  const current = existing(context.state, run_id, "reset", node_id);
  const node = current.run.nodes[node_id];
  if (node?.state !== "FAILED")
    throw rejection(
      "reset",
      run_id,
      node_id,
      node ? "workflow.reset_not_failed" : "dag.unknown_node",
      node
        ? `node ${node_id} of run ${run_id} is ${node.state}; only a FAILED node can be reset (use workflow.rerun.requested to run it again)`
        : `run ${run_id} has no node ${node_id}`,
    );
  return runAgain(context, current, "reset", node_id);
}

/** Re-run a node and everything below it; a re-run the DAG refuses becomes workflow.rejected. */
async function runAgain(
  { event, leasing, capacityFor }: RunContext,
  current: OrchestratorState,
  request: "rerun" | "reset",
  nodeId: string,
): Promise<OrchestratorDecision> {
  const def = definitionOf(current);
  const capacity = await capacityFor(def);
  const transition = refusing(request, current.run.run_id, nodeId, () =>
    rerunFrom(current.run, def, nodeId, capacity),
  );
  return applyTransition(current, transition, event, leasing);
}

/**
 * A release pass for the nodes backpressure held back. When it releases nothing while nodes stay
 * held, the state is still written with a new due time, so the sweeper nudges the run again.
 */
async function releaseHeld(
  { state, event, leasing, capacityFor }: RunContext,
  { run_id }: z.output<typeof WorkflowReleaseRequestedPayload>,
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
 * The sweeper found a node's lease expired: a failure of that node (transient,
 * agent_run.lease_expired), gated on the generation like any delivery, unless a heartbeat
 * extended the lease past the report.
 */
async function leaseExpired(
  { state, event, leasing, capacityFor }: RunContext,
  report: z.output<typeof NodeLeaseExpiredPayload>,
): Promise<OrchestratorDecision> {
  if (!state || leaseOutlivesReport(state, report, leasing.now)) return {};
  const { node_id, generation, expired_at } = report;
  const def = definitionOf(state);
  const error: NodeError = {
    code: "agent_run.lease_expired",
    error_class: "transient",
    message: `lease of node ${node_id} (generation ${generation}) expired${expired_at ? ` at ${expired_at}` : ""}; reported by ${event.producer}`,
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

/** An agent's `<role>.completed`: onNodeCompleted with the payload's output and generation. */
function completedBy(dagRole: string, agent: string): Handle<NodeCompleted> {
  return (context, { run_id, node_id, generation, output }) =>
    settleReported(context, dagRole, agent, run_id, node_id, (run, def, capacity) =>
      onNodeCompleted(run, def, node_id, output, generation, capacity),
    );
}

/** An agent's `<role>.failed`: onNodeFailed with the payload's error and generation. */
function failedBy(dagRole: string, agent: string): Handle<NodeFailed> {
  return (context, { run_id, node_id, generation, error }) =>
    settleReported(context, dagRole, agent, run_id, node_id, (run, def, capacity) =>
      onNodeFailed(run, def, node_id, nodeError(error), generation, capacity),
    );
}

/**
 * Apply an agent's outcome. The run must exist (else workflow.unknown_run) and the node must be
 * one the reporting role executes (else workflow.role_mismatch); duplicate, stale or
 * not-running deliveries are ignored by the DAG and change nothing.
 */
async function settleReported(
  { state, event, leasing, capacityFor }: RunContext,
  dagRole: string,
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
  if (node && node.role !== dagRole)
    throw new PermanentError(
      "workflow.role_mismatch",
      `${event.event_type} reports node ${nodeId} of run ${runId}, which the ${node.role} role executes, not ${agent}`,
      { details: { run_id: runId, node_id: nodeId, role: node.role } },
    );
  const transition = step(state.run, def, await capacityFor(def));
  return applyTransition(state, transition, event, leasing);
}

function nodeError(error: NodeFailed["error"]): NodeError {
  return { code: error.code, message: error.message, error_class: error.errorClass };
}

function existing(
  state: OrchestratorState | undefined,
  runId: string,
  request: WorkflowRejected["request"],
  nodeId?: string,
): OrchestratorState {
  if (state) return state;
  throw rejection(request, runId, nodeId, "workflow.unknown_run", `run ${runId} was never started`);
}

/** Run a DAG request; a request the run cannot satisfy becomes `workflow.rejected`. */
function refusing(
  request: WorkflowRejected["request"],
  runId: string,
  nodeId: string | undefined,
  run: () => Transition,
): Transition {
  try {
    return run();
  } catch (error) {
    if (error instanceof DagRequestError)
      throw rejection(request, runId, nodeId, error.code, error.message);
    throw error;
  }
}

/** A refusal of an operator request: business class, recorded as `workflow.rejected`. */
function rejection(
  request: WorkflowRejected["request"],
  runId: string,
  nodeId: string | undefined,
  code: string,
  message: string,
): BusinessRejection {
  const payload: WorkflowRejected = {
    run_id: runId,
    request,
    ...(nodeId === undefined ? {} : { node_id: nodeId }),
    code,
    message: message.slice(0, 4096),
  };
  return new BusinessRejection(code, message, { type: "workflow.rejected", payload });
}
