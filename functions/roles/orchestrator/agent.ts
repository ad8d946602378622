import {
  type ConfirmOutcome,
  type NodeBlocked,
  type NodeConfirmExpired,
  type NodeConfirmRequested,
  NodeConfirmRequestedPayload,
  type NodeStarted,
  type WorkflowConfirmRequested,
} from "../../../schemas/events/agent-run";
import { mapItemsOf } from "../../core/dag/assignment";
import { Draft } from "../../core/dag/draft";
import { graphOf } from "../../core/dag/graph";
import { assignment } from "../../core/dag/release-pass";
import type { EmitOf } from "../../core/define-role";
import { PermanentError } from "../../core/errors";
import {
  definitionOf,
  existing,
  type OrchestratorDecision,
  type OrchestratorEmit,
  type RunContext,
  rejection,
} from "./context";
import { currentLease, dueAtOf, type Leasing, withLease } from "./leases";
import {
  type AgentStepType,
  type NodeLease,
  type OrchestratorState,
  parseWith,
  TIMELINE_LIMIT,
} from "./state";

/**
 * What the agent of a RUNNING node reports about its work, beside its outcome (seed 001 §2):
 *
 * - `node.started`: the agent acknowledged the assignment (or resumed it after a confirmation).
 *   The node's lease starts (now + the larger of the agent's lease_seconds and the role's lease),
 *   `started_at` is recorded and the run's timeline gets `node.started`: the node is RUNNING for
 *   the operator, where before it waited in the agent's queue. A repeated acknowledgement, one
 *   for another assignment, or one for an assignment still BLOCKED (a redelivered request the
 *   agent answers BLOCKED again) changes nothing.
 * - `node.blocked`: the agent needs an external confirmation; the node is BLOCKED until
 *   `confirm_by` (its lease runs to confirm_by + the role's lease, a backstop), which joins the
 *   run's due time so the sweeper reports `node.confirm.expired` when it passes. A kit step role
 *   that waits for outside work (functions/core/step-role.ts) reports so with its next poll as
 *   `confirm_by`: the timeout it is then sent is its poll. For a map node,
 *   the report names the item, and the confirmation resumes that item. A map node waits for one
 *   item's confirmation at a time (one lease): another item's report while one waits is not
 *   recorded, and that item's agent reports again when its request is sent again (the node's
 *   lease running out), by which time the first has been answered.
 * - `workflow.confirm.requested` (an operator) or `node.confirm.expired` (the sweeper): the
 *   outcome (confirmed, refused, timed_out) goes to the node's agent as
 *   `<stem>.confirm.requested` on the run's stream, with the assignment's input again, and the
 *   node waits for the agent to resume (a queued lease). The agent applies ExternalUnblocked or
 *   ExternalConfirmTimeout to its agent run and answers `<stem>.completed` / `<stem>.failed` as
 *   for any assignment. A confirmation for a node that is not BLOCKED is refused
 *   (`workflow.rejected`, code workflow.confirm_not_blocked); a late or repeated expiry report
 *   changes nothing.
 */

type ConfirmType = Extract<OrchestratorEmit, `${string}.confirm.requested`>;

/** The state with one agent step appended to the run's timeline (a plan's wait is one too). */
export function withStep(
  state: OrchestratorState,
  step: AgentStepType,
  nodeId: string,
  generation: number,
  cause: string,
  now: Date,
): OrchestratorState {
  const entry = { at: now.toISOString(), event: step, node_id: nodeId, generation, cause };
  return { ...state, timeline: [...state.timeline, entry].slice(-TIMELINE_LIMIT) };
}

function decided(state: OrchestratorState, leasing: Leasing): OrchestratorDecision {
  return { state, dueAt: dueAtOf(state, leasing) };
}

const plus = (at: number, seconds: number) => new Date(at + seconds * 1000).toISOString();

function roleOf(context: RunContext, state: OrchestratorState, nodeId: string): string | undefined {
  return definitionOf(context, state).nodes.find((n) => n.id === nodeId)?.role;
}

/** The agent acknowledged an assignment: the node's lease starts, the timeline says so. */
export function nodeStarted(context: RunContext, report: NodeStarted): OrchestratorDecision {
  const { state, event, leasing } = context;
  const lease = state && currentLease(state, report.node_id, report.generation);
  if (!state || !lease) return {};
  if (lease.blocked ? !lease.blocked.outcome : lease.started) return {};
  const { now, policy } = leasing;
  const seconds = Math.max(
    report.lease_seconds,
    policy.leaseSeconds(roleOf(context, state, report.node_id)),
  );
  const { blocked: _blocked, ...rest } = lease;
  const next: NodeLease = {
    ...rest,
    started: true,
    started_at: now.toISOString(),
    expires_at: plus(now.getTime(), seconds),
  };
  const stepped = withStep(
    withLease(state, report.node_id, next),
    "node.started",
    report.node_id,
    report.generation,
    event.event_type,
    now,
  );
  return decided(stepped, leasing);
}

/** The agent's run is BLOCKED on a confirmation: the node waits until `confirm_by`. */
export function nodeBlocked(context: RunContext, report: NodeBlocked): OrchestratorDecision {
  const { state, event, leasing } = context;
  const lease = state && currentLease(state, report.node_id, report.generation);
  if (!state || !lease || lease.blocked?.confirm_by === report.confirm_by) return {};
  if (!itemMayBlock(state, report, lease)) return {};
  const role = roleOf(context, state, report.node_id);
  if (role === undefined || role !== report.agent)
    throw new PermanentError(
      "workflow.role_mismatch",
      `node.blocked from ${report.agent} for node ${report.node_id} of run ${report.run_id}, which the ${role ?? "(unknown)"} role executes`,
    );
  const { now, policy } = leasing;
  const next: NodeLease = {
    ...lease,
    started: true,
    started_at: lease.started_at ?? now.toISOString(),
    expires_at: plus(Date.parse(report.confirm_by), policy.leaseSeconds(role)),
    blocked: {
      since: now.toISOString(),
      confirm_by: report.confirm_by,
      question: report.question,
      ...(report.item === undefined ? {} : { item: report.item }),
    },
  };
  const stepped = withStep(
    withLease(state, report.node_id, next),
    "node.blocked",
    report.node_id,
    report.generation,
    event.event_type,
    now,
  );
  return decided(stepped, leasing);
}

/**
 * A report of a blocked map item counts when the item is RUNNING under the report's generation
 * and no other item of the node waits for its confirmation.
 */
function itemMayBlock(state: OrchestratorState, report: NodeBlocked, lease: NodeLease): boolean {
  if (report.item === undefined) return true;
  const item = state.run.nodes[report.node_id]?.items?.[report.item];
  if (item?.state !== "RUNNING" || item.assigned_generation !== report.generation) return false;
  const waiting = lease.blocked && !lease.blocked.outcome ? lease.blocked.item : undefined;
  return waiting === undefined || waiting === report.item;
}

/** An operator's answer to a BLOCKED node, handed to its agent; refused when it is not BLOCKED. */
export function confirmNode(
  context: RunContext,
  { run_id, node_id, answer, note, requested_by }: WorkflowConfirmRequested,
): OrchestratorDecision {
  const current = existing(context.state, run_id, "confirm", node_id);
  const node = current.run.nodes[node_id];
  const generation = node?.assigned_generation;
  const lease = generation === undefined ? undefined : currentLease(current, node_id, generation);
  if (!node || !lease?.blocked || lease.blocked.outcome)
    throw rejection(
      "confirm",
      run_id,
      node_id,
      node ? "workflow.confirm_not_blocked" : "dag.unknown_node",
      node
        ? `node ${node_id} of run ${run_id} is not BLOCKED on a confirmation${lease?.blocked?.outcome ? ` (it was ${lease.blocked.outcome})` : ` (it is ${node.state})`}`
        : `run ${run_id} has no node ${node_id}`,
    );
  return sendOutcome(context, current, node_id, lease, answer, {
    requested_by,
    ...(note === undefined ? {} : { note }),
  });
}

/** The sweeper found a BLOCKED node past its deadline: the agent is told it timed out. */
export function confirmExpired(
  context: RunContext,
  report: NodeConfirmExpired,
): OrchestratorDecision {
  const { state, leasing } = context;
  const lease = state && currentLease(state, report.node_id, report.generation);
  const blocked = lease?.blocked;
  if (!state || !lease || !blocked || blocked.outcome) return {};
  if (blocked.confirm_by !== report.confirm_by) return {};
  if (Date.parse(blocked.confirm_by) > leasing.now.getTime()) return {};
  return sendOutcome(context, state, report.node_id, lease, "timed_out", {});
}

/** The confirmation's payload: the node's current assignment, its input again, and the outcome. */
function confirmation(
  context: RunContext,
  state: OrchestratorState,
  nodeId: string,
  role: string,
  generation: number,
  answer: Pick<NodeConfirmRequested, "outcome" | "question" | "note" | "requested_by">,
  itemIndex?: number,
): NodeConfirmRequested | undefined {
  const def = definitionOf(context, state);
  const node = state.run.nodes[nodeId];
  const draft = new Draft(graphOf(def), state.run);
  const items = node?.items;
  const item =
    itemIndex === undefined || !items
      ? undefined
      : { index: itemIndex, count: items.length, value: mapItemsOf(draft, nodeId)?.[itemIndex] };
  const attempt = item ? (items?.[item.index]?.attempt ?? 1) : (node?.attempt ?? 1);
  const assigned = assignment(draft, nodeId, role, attempt, generation, item);
  if (assigned.type !== "node.assign") return undefined;
  return parseWith(
    NodeConfirmRequestedPayload,
    {
      run_id: state.run.run_id,
      node_id: nodeId,
      generation,
      attempt: assigned.attempt,
      ...answer,
      input: { ...assigned.input },
      run_input: assigned.run_input,
      ...(assigned.item ? { item: assigned.item } : {}),
      ...(assigned.loop ? { loop: assigned.loop } : {}),
    },
    "workflow.invalid_run_input",
    `the confirmation of node ${nodeId} of run ${state.run.run_id}`,
  );
}

/**
 * `<stem>.confirm.requested` for the node's current assignment, with its input again; the node's
 * lease becomes a queued one until the agent resumes (its `node.started`).
 */
function sendOutcome(
  context: RunContext,
  state: OrchestratorState,
  nodeId: string,
  lease: NodeLease,
  outcome: ConfirmOutcome,
  by: Pick<NodeConfirmRequested, "note" | "requested_by">,
): OrchestratorDecision {
  const { event, leasing } = context;
  const blocked = lease.blocked;
  const role = roleOf(context, state, nodeId);
  if (!blocked || role === undefined) return {};
  const confirm = context.stepRoles.of(role).confirm;
  if (confirm === undefined)
    throw new PermanentError(
      "workflow.no_confirmation",
      `node ${nodeId} of run ${state.run.run_id} is BLOCKED, but its step role ${role} takes no confirmation`,
    );
  const answer = { outcome, question: blocked.question, ...by };
  const payload = confirmation(
    context,
    state,
    nodeId,
    role,
    lease.generation,
    answer,
    blocked.item,
  );
  if (!payload) return {};
  const { now, policy } = leasing;
  const next: NodeLease = {
    ...lease,
    started: false,
    expires_at: plus(now.getTime(), policy.queuedSeconds),
    blocked: { ...blocked, outcome },
  };
  const stepped = withStep(
    withLease(state, nodeId, next),
    "node.unblocked",
    nodeId,
    lease.generation,
    event.event_type,
    now,
  );
  return {
    ...decided(stepped, leasing),
    // The role's confirmation type, known at run time only (the step-role table names it): typed
    // as one the orchestrator declares, which it is not; the registry checks the payload against
    // the role's own type on emit.
    emit: [
      { type: confirm, payload, orderKey: state.run.run_id } as unknown as EmitOf<ConfirmType>,
    ],
  };
}
