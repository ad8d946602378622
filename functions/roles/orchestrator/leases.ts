import type { NodeHeartbeat, NodeLeaseExpired } from "../../../schemas/events/workflow";
import type { WorkflowDefinition } from "../../core/dag/definition";
import { hasWorkInFlight } from "../../core/dag/map";
import type { Transition } from "../../core/dag/run";
import { type NodeLease, type OrchestratorState, pendingPlanApproval } from "./state";
import { currentTimers } from "./timers";

/**
 * Node leases and the run's due time, in one place. Every node released to an agent gets a lease,
 * held in the state's `leases` while the node is RUNNING under that assignment; it goes when the
 * node leaves RUNNING.
 *
 * - Queued: from the release, a request may wait in the agent's queue behind other work for as
 *   long as a backlog lasts, so its lease is `LeasePolicy.queuedSeconds` (long).
 * - Started: the agent acknowledges the request when it starts on it (its first `node.heartbeat`);
 *   the lease is then reset to now + the larger of the heartbeat's `lease_seconds` and the role's
 *   `leaseSeconds`, and each later heartbeat extends it (never shortens it).
 * - Run out: the outcome is unknown, not a failure (the request may still be queued, the answer
 *   may be lost): the same assignment is sent again (`redeliver`, same generation) with a fresh
 *   queued lease, at most `maxRedeliveries` times; only then is the node failed
 *   (`agent_run.lease_expired`). The agent answers a request it already answered from its record,
 *   and the DAG counts one answer per assignment.
 *
 * - Blocked: while the node's agent run is BLOCKED on a confirmation (./agent), the
 *   lease runs to the confirmation deadline plus the role's lease, a backstop behind the deadline.
 * - A map node has one lease for all its items (./items): each item assigned renews it as a
 *   queued lease, any item's acknowledgement or heartbeat starts or extends it (they name the
 *   node, not the item), and when it runs out every item still RUNNING is sent again (one
 *   redelivery of the node), or, once the redeliveries are spent, fails.
 *
 * A wait node has no lease: no role carries it out, and its time is its timer (./timers).
 *
 * The run's due time (the state table's by-due index, read by the lease sweeper) is the earliest
 * of: the lease expiry of a RUNNING node, the confirmation deadline of a BLOCKED one, the
 * dependency timeout of a waiting one (./waits), the time of a RUNNING wait node (./timers), the
 * deadline of a plan's approval (./plan-approval), and, with no work in flight but nodes held back,
 * now + the nudge delay. A map node RUNNING with none of its items RUNNING (the rest held by a cap)
 * has no work in flight: no answer will come to release its held items, so it is nudged too.
 */

/** How long leases last and how soon a run with held nodes is nudged. */
export interface LeasePolicy {
  /** Seconds the lease of a started node of this role lasts at least, from its start. */
  leaseSeconds(role: string | undefined): number;
  /** Seconds a request may wait for its agent to start on it. */
  readonly queuedSeconds: number;
  /** How many times an assignment whose lease ran out is sent again before the node fails. */
  readonly maxRedeliveries: number;
  /** With nothing RUNNING and nodes held, seconds until the sweeper nudges the run. */
  readonly nudgeSeconds: number;
  /** How long a node may wait for its inputs when its workflow does not say. */
  readonly dependencySeconds: number;
}

/** The policy at the time of one decision. */
export interface Leasing {
  readonly now: Date;
  readonly policy: LeasePolicy;
}

function leasesOf(state: OrchestratorState): Readonly<Record<string, NodeLease>> {
  return state.leases ?? {};
}

const plusSeconds = (now: Date, seconds: number) =>
  new Date(now.getTime() + seconds * 1000).toISOString();

/**
 * The lease of every RUNNING node a role carries out after a transition: a queued one for a node
 * assigned by it (or a map item of it; counting the redeliveries of the same assignment), the held
 * one for a node still in the same assignment, a queued one for a RUNNING node without one (a
 * state stored before leases). Nodes that left RUNNING lose theirs.
 */
export function leasesAfter(
  state: OrchestratorState,
  def: WorkflowDefinition,
  transition: Transition,
  { now, policy }: Leasing,
): Record<string, NodeLease> {
  const carried = new Set(def.nodes.flatMap((n) => (n.role === undefined ? [] : [n.id])));
  const assigned = new Set(
    transition.commands.flatMap((c) => (c.type === "node.assign" ? [c.node_id] : [])),
  );
  const redelivered = new Set(
    transition.events.flatMap((e) => (e.type === "node.redelivered" ? [e.node_id] : [])),
  );
  const held = leasesOf(state);
  const leases: Record<string, NodeLease> = {};
  for (const [nodeId, node] of Object.entries(transition.run.nodes)) {
    if (node.state !== "RUNNING" || !carried.has(nodeId)) continue;
    const generation = node.assigned_generation ?? transition.run.generation;
    const kept = held[nodeId]?.generation === generation ? held[nodeId] : undefined;
    if (kept && !assigned.has(nodeId)) {
      leases[nodeId] = kept;
      continue;
    }
    const redeliveries = kept && redelivered.has(nodeId) ? (kept.redeliveries ?? 0) + 1 : 0;
    leases[nodeId] = {
      generation,
      expires_at: plusSeconds(now, policy.queuedSeconds),
      ...(redeliveries > 0 ? { redeliveries } : {}),
    };
  }
  return leases;
}

/** The lease of a node RUNNING in `generation` (its current assignment), if it has one. */
export function currentLease(
  state: OrchestratorState,
  nodeId: string,
  generation: number,
): NodeLease | undefined {
  if (state.run.status !== "RUNNING") return undefined;
  const node = state.run.nodes[nodeId];
  if (node?.state !== "RUNNING" || node.assigned_generation !== generation) return undefined;
  const lease = leasesOf(state)[nodeId];
  return lease?.generation === generation ? lease : undefined;
}

/** The state with `lease` as the lease of `nodeId`. */
export function withLease(
  state: OrchestratorState,
  nodeId: string,
  lease: NodeLease,
): OrchestratorState {
  return { ...state, leases: { ...leasesOf(state), [nodeId]: lease } };
}

/**
 * The state with the lease of a node RUNNING in the heartbeat's generation started (the agent's
 * first heartbeat: now + the larger of lease_seconds and the role's lease) or extended to at
 * least now + lease_seconds; undefined when there is nothing to change (not running, stale, or
 * a started lease that already lasts that long).
 */
export function extendLease(
  state: OrchestratorState | undefined,
  def: WorkflowDefinition | undefined,
  heartbeat: NodeHeartbeat,
  { now, policy }: Leasing,
): OrchestratorState | undefined {
  if (state?.run.status !== "RUNNING") return undefined;
  const node = state.run.nodes[heartbeat.node_id];
  if (node?.state !== "RUNNING" || node.assigned_generation !== heartbeat.generation)
    return undefined;
  const current = leasesOf(state)[heartbeat.node_id];
  const mine = current && current.generation === heartbeat.generation ? current : undefined;
  let wanted = now.getTime() + heartbeat.lease_seconds * 1000;
  if (!mine?.started) {
    const role = def?.nodes.find((n) => n.id === heartbeat.node_id)?.role;
    wanted = Math.max(wanted, now.getTime() + policy.leaseSeconds(role) * 1000);
  } else if (Date.parse(mine.expires_at) >= wanted) return undefined;
  const lease: NodeLease = {
    ...mine,
    generation: heartbeat.generation,
    expires_at: new Date(wanted).toISOString(),
    started: true,
  };
  return { ...state, leases: { ...leasesOf(state), [heartbeat.node_id]: lease } };
}

/** Whether an assignment whose lease ran out may be sent again (else the node fails). */
export function mayRedeliver(
  state: OrchestratorState,
  report: NodeLeaseExpired,
  policy: LeasePolicy,
): boolean {
  const held = leasesOf(state)[report.node_id];
  if (held?.generation !== report.generation) return false;
  return (held.redeliveries ?? 0) < policy.maxRedeliveries;
}

/**
 * Whether a lease report is out of date: a heartbeat extended the lease after the sweeper saw it
 * expire, and the extended lease has not run out yet (the node is alive).
 */
export function leaseOutlivesReport(
  state: OrchestratorState,
  report: NodeLeaseExpired,
  now: Date,
): boolean {
  const held = leasesOf(state)[report.node_id];
  return (
    held !== undefined &&
    held.generation === report.generation &&
    report.expired_at !== undefined &&
    Date.parse(held.expires_at) > Date.parse(report.expired_at) &&
    Date.parse(held.expires_at) > now.getTime()
  );
}

/**
 * When the run next needs the sweeper: the earliest lease expiry of a RUNNING node, confirmation
 * deadline, dependency deadline, wait node's time or plan approval's deadline; with no work in
 * flight (`hasWorkInFlight`) but nodes held back, now + the nudge delay; otherwise never (null).
 */
export function dueAtOf(state: OrchestratorState, { now, policy }: Leasing): string | null {
  if (state.run.status !== "RUNNING") return null;
  const leases = leasesOf(state);
  let earliest: number | undefined;
  const consider = (iso: string) => {
    const t = Date.parse(iso);
    if (earliest === undefined || t < earliest) earliest = t;
  };
  let running = false;
  for (const [nodeId, node] of Object.entries(state.run.nodes)) {
    const held = leases[nodeId];
    if (hasWorkInFlight(node)) running = true;
    if (node.state === "RUNNING" && held) {
      consider(held.expires_at);
      if (held.blocked && !held.blocked.outcome) consider(held.blocked.confirm_by);
    }
    const wait = state.waits?.[nodeId];
    if (wait && (node.state === "PENDING" || node.state === "READY")) consider(wait.due_at);
    const approval = pendingPlanApproval(state, nodeId);
    if (approval) consider(approval.deadline);
  }
  for (const [, timer] of currentTimers(state)) consider(timer.due_at);
  if (!running && state.held.length > 0) consider(plusSeconds(now, policy.nudgeSeconds));
  return earliest === undefined ? null : new Date(earliest).toISOString();
}
