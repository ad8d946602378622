import type { NodeHeartbeat, NodeLeaseExpired } from "../../schemas/events/workflow";
import type { WorkflowDefinition } from "../core/dag/definition";
import type { Transition } from "../core/dag/run";
import type { NodeLease, OrchestratorState } from "./orchestrator-state";

/**
 * Node leases and the run's due time, in one place. Every node released to an agent gets a lease
 * (`LeasePolicy.leaseSeconds` of its DAG role), held in the state's `leases` while the node is
 * RUNNING under that assignment; a heartbeat extends it (never shortens it); it goes when the
 * node leaves RUNNING. The lease runs from the assignment (when the request is emitted), so time
 * a request waits in the agent's queue counts against it.
 *
 * The run's due time (the state table's by-due index, read by the lease sweeper) is the earliest
 * lease expiry of a RUNNING node; with nothing RUNNING but nodes held back, now + the nudge delay.
 */

/** How long leases last and how soon a run with held nodes is nudged. */
export interface LeasePolicy {
  /** Seconds a fresh lease of a node of this DAG role lasts. */
  leaseSeconds(dagRole: string | undefined): number;
  /** With nothing RUNNING and nodes held, seconds until the sweeper nudges the run. */
  readonly nudgeSeconds: number;
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
 * The lease of every RUNNING node after a transition: a fresh one for a node assigned by it, the
 * held one for a node still in the same assignment, a fresh one for a RUNNING node without one
 * (a state stored before leases). Nodes that left RUNNING lose theirs.
 */
export function leasesAfter(
  state: OrchestratorState,
  def: WorkflowDefinition,
  transition: Transition,
  { now, policy }: Leasing,
): Record<string, NodeLease> {
  const roleOf = (nodeId: string) => def.nodes.find((n) => n.id === nodeId)?.role;
  const assigned = new Set(
    transition.commands.flatMap((c) => (c.type === "node.assign" ? [c.node_id] : [])),
  );
  const held = leasesOf(state);
  const leases: Record<string, NodeLease> = {};
  for (const [nodeId, node] of Object.entries(transition.run.nodes)) {
    if (node.state !== "RUNNING") continue;
    const generation = node.assigned_generation ?? transition.run.generation;
    const kept = held[nodeId];
    leases[nodeId] =
      !assigned.has(nodeId) && kept && kept.generation === generation
        ? kept
        : { generation, expires_at: plusSeconds(now, policy.leaseSeconds(roleOf(nodeId))) };
  }
  return leases;
}

/**
 * The state with the lease of a node RUNNING in the heartbeat's generation extended to at least
 * now + lease_seconds; undefined when there is nothing to change (not running, stale, or the
 * lease already lasts that long).
 */
export function extendLease(
  state: OrchestratorState | undefined,
  heartbeat: NodeHeartbeat,
  now: Date,
): OrchestratorState | undefined {
  if (state?.run.status !== "RUNNING") return undefined;
  const node = state.run.nodes[heartbeat.node_id];
  if (node?.state !== "RUNNING" || node.assigned_generation !== heartbeat.generation)
    return undefined;
  const current = leasesOf(state)[heartbeat.node_id];
  const wanted = now.getTime() + heartbeat.lease_seconds * 1000;
  const held =
    current && current.generation === heartbeat.generation ? Date.parse(current.expires_at) : 0;
  if (held >= wanted) return undefined;
  const lease: NodeLease = {
    generation: heartbeat.generation,
    expires_at: new Date(wanted).toISOString(),
  };
  return { ...state, leases: { ...leasesOf(state), [heartbeat.node_id]: lease } };
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
 * When the run next needs the sweeper: the earliest lease expiry of a RUNNING node; with nothing
 * RUNNING but nodes held back, now + the nudge delay; otherwise never (null).
 */
export function dueAtOf(state: OrchestratorState, { now, policy }: Leasing): string | null {
  if (state.run.status !== "RUNNING") return null;
  const leases = leasesOf(state);
  let earliest: number | undefined;
  for (const [nodeId, node] of Object.entries(state.run.nodes)) {
    const held = leases[nodeId];
    if (node.state !== "RUNNING" || !held) continue;
    const t = Date.parse(held.expires_at);
    if (earliest === undefined || t < earliest) earliest = t;
  }
  if (earliest !== undefined) return new Date(earliest).toISOString();
  if (state.held.length > 0) return plusSeconds(now, policy.nudgeSeconds);
  return null;
}
