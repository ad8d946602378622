import type { Envelope } from "../../schemas";
import {
  type ContentRole,
  type NodeFailed,
  type NodeHeartbeat,
  type NodeLeaseExpired,
  type NodeRequested,
  WORKFLOW_KINDS,
  type WorkflowKind,
  type WorkflowRejected,
  type WorkflowReleaseRequested,
  type WorkflowRerunRequested,
  type WorkflowResetRequested,
  type WorkflowStartRequested,
} from "../../schemas/events/workflow";
import {
  type Capacity,
  contentWorkflowFor,
  type DagEvent,
  DagRequestError,
  type DagRun,
  type HeldNode,
  onNodeCompleted,
  onNodeFailed,
  release,
  rerunFrom,
  startRun,
  type Transition,
  type WorkflowDefinition,
} from "../core/dag";
import type { EmitSpec } from "../core/emit";
import { BusinessRejection, PermanentError } from "../core/errors";
import type { Decision, Role } from "../core/pipeline";
import { summarizeRun } from "./summaries";

/**
 * The orchestrator (seed 001 §3, §6; DESIGN "Orchestration"): one consumer group that owns every
 * DAG run. A run is the aggregate `dag_run/<run_id>`; every event about it (the operator's
 * commands, the agents' outcomes, the sweeper's lease reports) carries `order_key = run_id`, so
 * the group's FIFO queue hands one run's events to one worker at a time and its updates are
 * serialized (the state revision condition catches anything that slips through).
 *
 * Decisions (pure apart from the optional queue-depth read; nothing here calls AWS):
 * - workflow.start.requested: a new run of `contentWorkflowFor(kind)`; one `<role>.requested`
 *   per node the DAG releases. A start for a run that exists is a no-op (idempotent). An unknown
 *   workflow kind is refused with `workflow.rejected` (business, no retry).
 * - `<role>.completed` / `<role>.failed`: onNodeCompleted / onNodeFailed with the payload's
 *   generation. Duplicate, stale (older generation) or not-running deliveries are ignored by the
 *   DAG: nothing is emitted and the state is not written. Released downstream nodes become
 *   `<role>.requested`; when the run ends, `workflow.completed|partial|failed` with runResult.
 * - node.lease.expired: a failure of that node (code `agent_run.lease_expired`, transient)
 *   through onNodeFailed, gated on the generation like any other delivery; the lost worker's
 *   late result is then ignored.
 * - workflow.rerun.requested: rerunFrom(node) (any node; a new generation). A blocked re-run or
 *   an unknown run or node -> `workflow.rejected`.
 * - workflow.reset.requested: the ManualReset of seed 001 §2.3 at the run level. Accepted only
 *   for a node that is FAILED (otherwise `workflow.rejected`, code workflow.reset_not_failed); the
 *   node and its descendants run again under a new generation (rerunFrom). Agent runs are keyed
 *   by generation, so the new assignment starts a fresh agent run at IDLE; the FAILED (or
 *   NEEDS_HUMAN) agent run of the old generation stays as the record of the failure and is never
 *   reassigned (its reset is implied, which is what ManualReset -> IDLE -> TaskAssigned means).
 * - workflow.release.requested: a release pass (for nodes that backpressure held back). When
 *   it releases nothing while nodes stay held, the state is still written with a new due time,
 *   so the sweeper nudges the run again later.
 * - node.heartbeat: the agent of a node is still working (a long model call); for the node's
 *   current generation while RUNNING, its lease is extended to at least now + lease_seconds
 *   (state only, nothing emitted). Stale or unknown heartbeats are ignored.
 *
 * Leases and the due index: every node released to an agent gets a lease in `leases`
 * (`leaseSeconds`, per DAG role in `leaseSecondsByRole`); it goes when the node leaves RUNNING.
 * Each state write carries `dueAt` (the state table's by-due index): the earliest lease expiry
 * of a RUNNING node; with nothing RUNNING but nodes held, now + `releaseNudgeSeconds`; else none.
 * The lease sweeper (functions/core/sweeper.ts) reads that index and sends `node.lease.expired`
 * or `workflow.release.requested`. A lease report is ignored when the node's lease was extended
 * past the reported expiry and has not run out yet (a heartbeat crossed the report).
 *
 * Backpressure: per-role caps come from the workflow definition (`concurrency.perRole`, applied
 * by the DAG on every release pass). A pure role cannot see queue depths, so queue-depth gating
 * needs an injected depth source: `createOrchestrator({ queueDepth })` asks it for the depth of
 * each agent group's queue before a decision and the DAG holds new work for a group whose depth
 * (plus what the pass released) reaches `queueDepthThreshold`. Held nodes stay READY and go out
 * on the run's next event; when nothing of the run is RUNNING any more, a scheduler must send
 * `workflow.release.requested` for runs with held nodes (listed in the state's `held`).
 *
 * `node.cancel` commands (a re-run while nodes of the old generation are RUNNING) are not sent:
 * the agents have no cancel channel yet. Their late results carry the old generation and are
 * ignored as stale.
 */

/** DAG role (a node's `role` in the workflow definition) -> agent role and its event types. */
export const ROLE_TABLE: Readonly<
  Record<
    string,
    {
      readonly agent: ContentRole;
      readonly requested: string;
      readonly completed: string;
      readonly failed: string;
    }
  >
> = {
  "topic-selector": {
    agent: "topic-selection",
    requested: "topic_selection.requested",
    completed: "topic_selection.completed",
    failed: "topic_selection.failed",
  },
  "fact-checker": {
    agent: "fact-check",
    requested: "fact_check.requested",
    completed: "fact_check.completed",
    failed: "fact_check.failed",
  },
  writer: {
    agent: "writing",
    requested: "writing.requested",
    completed: "writing.completed",
    failed: "writing.failed",
  },
  reviewer: {
    agent: "review",
    requested: "review.requested",
    completed: "review.completed",
    failed: "review.failed",
  },
};

const OUTCOMES = new Map<
  string,
  { dagRole: string; agent: ContentRole; outcome: "completed" | "failed" }
>(
  Object.entries(ROLE_TABLE).flatMap(([dagRole, entry]) => [
    [entry.completed, { dagRole, agent: entry.agent, outcome: "completed" as const }],
    [entry.failed, { dagRole, agent: entry.agent, outcome: "failed" as const }],
  ]),
);

const RUN_END_EVENTS: Readonly<Record<string, string>> = {
  "run.completed": "workflow.completed",
  "run.partial": "workflow.partial",
  "run.failed": "workflow.failed",
};

/** Messages addressed to a run from outside (aggregate dag_run/<run_id>, version 0). */
const RUN_ADDRESSED: ReadonlySet<string> = new Set([
  "workflow.start.requested",
  "workflow.rerun.requested",
  "workflow.reset.requested",
  "workflow.release.requested",
  "node.lease.expired",
  "node.heartbeat",
]);

export const TIMELINE_LIMIT = 200;
export const DEFAULT_QUEUE_DEPTH_THRESHOLD = 100;

/** One step of a run as the DAG reported it, with the event that caused it. */
export interface TimelineEntry {
  readonly at: string;
  readonly event: DagEvent["type"];
  readonly node_id?: string;
  readonly generation?: number;
  /** The event type that led to this step. */
  readonly cause: string;
}

export interface OrchestratorState {
  /** The workflow kind the run was started with (selects the definition). */
  readonly workflow: WorkflowKind;
  readonly run: DagRun;
  /** READY nodes a cap or the queue-depth gate held back on the last pass. */
  readonly held: readonly HeldNode[];
  /** The last TIMELINE_LIMIT steps of the run. */
  readonly timeline: readonly TimelineEntry[];
  /** The lease of each RUNNING node (absent in states stored before leases: read as {}). */
  readonly leases?: Readonly<Record<string, NodeLease>>;
  /** Correlation and task of the start request: what the sweeper's reports about the run carry. */
  readonly origin?: { readonly correlation_id: string; readonly task_id: string };
}

/** How long a RUNNING node's current assignment may go without an outcome or a heartbeat. */
export interface NodeLease {
  readonly generation: number;
  /** ISO 8601. */
  readonly expires_at: string;
}

/** Messages waiting in each agent group's queue, by group name (missing groups count as 0). */
export type QueueDepthSource = (
  groups: readonly string[],
) => Readonly<Record<string, number>> | Promise<Readonly<Record<string, number>>>;

export interface OrchestratorOptions {
  /** Where queue depths come from (e.g. SQS ApproximateNumberOfMessages); none = no gate. */
  readonly queueDepth?: QueueDepthSource;
  /** Depth at which release of new work for a group stops. @default 100 */
  readonly queueDepthThreshold?: number;
  /** Lease of a node released to an agent, in seconds. @default 900 */
  readonly leaseSeconds?: number;
  /** Lease per DAG role (e.g. `writer`), overriding `leaseSeconds`. */
  readonly leaseSecondsByRole?: Readonly<Record<string, number>>;
  /** With nothing RUNNING and nodes held, how soon the sweeper nudges the run. @default 30 */
  readonly releaseNudgeSeconds?: number;
}

export const DEFAULT_LEASE_SECONDS = 900;
export const DEFAULT_RELEASE_NUDGE_SECONDS = 30;

/** What `apply` needs to keep leases and the due time. */
interface Leasing {
  readonly now: Date;
  readonly leaseSeconds: (dagRole: string | undefined) => number;
  readonly nudgeSeconds: number;
}

export const ORCHESTRATOR_GROUP = "orchestrator";

export const ORCHESTRATOR_SUBSCRIPTIONS: readonly string[] = [
  "workflow.start.requested",
  "workflow.rerun.requested",
  "workflow.reset.requested",
  "workflow.release.requested",
  "node.lease.expired",
  "node.heartbeat",
  ...Object.values(ROLE_TABLE).flatMap((entry) => [entry.completed, entry.failed]),
];

export function createOrchestrator(options: OrchestratorOptions = {}): Role<OrchestratorState> {
  const seconds = (value: number | undefined, what: string, fallback: number) => {
    const v = value ?? fallback;
    if (!Number.isFinite(v) || v <= 0)
      throw new PermanentError(
        "orchestrator.invalid_option",
        `${what} must be a positive number of seconds, got ${v}`,
      );
    return v;
  };
  const defaultLease = seconds(options.leaseSeconds, "leaseSeconds", DEFAULT_LEASE_SECONDS);
  const byRole: Record<string, number> = {};
  for (const [role, value] of Object.entries(options.leaseSecondsByRole ?? {}))
    byRole[role] = seconds(value, `leaseSecondsByRole.${role}`, DEFAULT_LEASE_SECONDS);
  const nudgeSeconds = seconds(
    options.releaseNudgeSeconds,
    "releaseNudgeSeconds",
    DEFAULT_RELEASE_NUDGE_SECONDS,
  );
  const leasing = (now: Date): Leasing => ({
    now,
    leaseSeconds: (role) => (role !== undefined ? byRole[role] : undefined) ?? defaultLease,
    nudgeSeconds,
  });
  const capacityFor = async (def: WorkflowDefinition): Promise<Capacity> => {
    if (!options.queueDepth) return {};
    const dagRoles = [...new Set(def.nodes.map((node) => node.role))].sort();
    const groups = dagRoles.map((role) => agentOf(role).agent);
    const depth = await options.queueDepth(groups);
    const queueDepth: Record<string, number> = {};
    for (const role of dagRoles) queueDepth[role] = depth[agentOf(role).agent] ?? 0;
    return { queueDepth, threshold: options.queueDepthThreshold ?? DEFAULT_QUEUE_DEPTH_THRESHOLD };
  };

  return {
    group: ORCHESTRATOR_GROUP,
    subscriptions: ORCHESTRATOR_SUBSCRIPTIONS,
    stateOf: (event) => ({ type: "dag_run", id: (event.payload as { run_id: string }).run_id }),
    summarize: summarizeRun,
    async decide(stored, event, { now }) {
      // A refused start leaves the stream's state at null: there is no run.
      const state = stored ?? undefined;
      const runId = (event.payload as { run_id: string }).run_id;
      if (RUN_ADDRESSED.has(event.event_type) && event.aggregate.id !== runId)
        throw new PermanentError(
          "workflow.aggregate_mismatch",
          `${event.event_type} names run ${runId} in its payload but aggregate ${event.aggregate.type}/${event.aggregate.id}`,
        );
      const lease = leasing(now);
      switch (event.event_type) {
        case "workflow.start.requested":
          return start(state, event as Envelope<WorkflowStartRequested>, capacityFor, lease);
        case "workflow.rerun.requested": {
          const { run_id, node_id } = (event as Envelope<WorkflowRerunRequested>).payload;
          const current = existing(state, run_id, "rerun", node_id);
          const def = definitionOf(current);
          const capacity = await capacityFor(def);
          const transition = refusing("rerun", run_id, node_id, () =>
            rerunFrom(current.run, def, node_id, capacity),
          );
          return apply(current, transition, event, lease);
        }
        case "workflow.reset.requested": {
          const { run_id, node_id } = (event as Envelope<WorkflowResetRequested>).payload;
          const current = existing(state, run_id, "reset", node_id);
          const def = definitionOf(current);
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
          const capacity = await capacityFor(def);
          const transition = refusing("reset", run_id, node_id, () =>
            rerunFrom(current.run, def, node_id, capacity),
          );
          return apply(current, transition, event, lease);
        }
        case "workflow.release.requested": {
          const { run_id } = (event as Envelope<WorkflowReleaseRequested>).payload;
          const current = existing(state, run_id, "release");
          if (current.run.status !== "RUNNING") return {};
          const def = definitionOf(current);
          const decision = apply(
            current,
            release(current.run, def, await capacityFor(def)),
            event,
            lease,
          );
          // Nothing released while nodes stay held: ask the sweeper to nudge again later.
          if (decision.state === undefined && current.held.length > 0)
            return { state: current, dueAt: dueAtOf(current, lease) };
          return decision;
        }
        case "node.heartbeat":
          return heartbeat(state, (event as Envelope<NodeHeartbeat>).payload, lease);
        case "node.lease.expired": {
          const { node_id, generation, expired_at } = (event as Envelope<NodeLeaseExpired>).payload;
          if (!state) return {};
          // A heartbeat extended the lease after the sweeper saw it expire: the node is alive.
          const held = state.leases?.[node_id];
          if (
            held &&
            held.generation === generation &&
            expired_at !== undefined &&
            Date.parse(held.expires_at) > Date.parse(expired_at) &&
            Date.parse(held.expires_at) > now.getTime()
          )
            return {};
          const def = definitionOf(state);
          const error = {
            code: "agent_run.lease_expired",
            error_class: "transient" as const,
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
          return apply(state, transition, event, lease);
        }
        default:
          return outcome(state, event, capacityFor, lease);
      }
    },
  };
}

/** The orchestrator with per-role caps from the definitions and no queue-depth gate. */
export const orchestrator: Role<OrchestratorState> = createOrchestrator();

async function start(
  state: OrchestratorState | undefined,
  event: Envelope<WorkflowStartRequested>,
  capacityFor: (def: WorkflowDefinition) => Promise<Capacity>,
  lease: Leasing,
): Promise<Decision<OrchestratorState>> {
  const { run_id, workflow, request } = event.payload;
  if (state) return {};
  if (!isWorkflowKind(workflow))
    throw rejection(
      "start",
      run_id,
      undefined,
      "workflow.unknown_kind",
      `workflow ${JSON.stringify(workflow)} is not one of ${WORKFLOW_KINDS.join(", ")}`,
    );
  const def = contentWorkflowFor({ kind: workflow });
  const transition = startRun(def, run_id, request, await capacityFor(def));
  return apply(
    {
      workflow,
      run: transition.run,
      held: [],
      timeline: [],
      leases: {},
      origin: { correlation_id: event.correlation_id, task_id: event.task_id },
    },
    transition,
    event,
    lease,
  );
}

async function outcome(
  state: OrchestratorState | undefined,
  event: Envelope,
  capacityFor: (def: WorkflowDefinition) => Promise<Capacity>,
  lease: Leasing,
): Promise<Decision<OrchestratorState>> {
  const kind = OUTCOMES.get(event.event_type);
  if (!kind)
    throw new PermanentError(
      "orchestrator.unhandled",
      `the orchestrator cannot handle ${event.event_type}`,
    );
  const payload = event.payload as { run_id: string; node_id: string; generation: number };
  if (!state)
    throw new PermanentError(
      "workflow.unknown_run",
      `${event.event_type} for run ${payload.run_id}, which was never started`,
      { details: { run_id: payload.run_id, node_id: payload.node_id } },
    );
  const def = definitionOf(state);
  const node = def.nodes.find((n) => n.id === payload.node_id);
  if (node && node.role !== kind.dagRole)
    throw new PermanentError(
      "workflow.role_mismatch",
      `${event.event_type} reports node ${payload.node_id} of run ${payload.run_id}, which the ${node.role} role executes, not ${kind.agent}`,
      { details: { run_id: payload.run_id, node_id: payload.node_id, role: node.role } },
    );
  const capacity = await capacityFor(def);
  const transition =
    kind.outcome === "completed"
      ? onNodeCompleted(
          state.run,
          def,
          payload.node_id,
          (event.payload as { output: unknown }).output,
          payload.generation,
          capacity,
        )
      : onNodeFailed(
          state.run,
          def,
          payload.node_id,
          toNodeError((event.payload as NodeFailed).error),
          payload.generation,
          capacity,
        );
  return apply(state, transition, event, lease);
}

/** Extend the lease of a node RUNNING in the heartbeat's generation; anything else is a no-op. */
function heartbeat(
  state: OrchestratorState | undefined,
  payload: NodeHeartbeat,
  lease: Leasing,
): Decision<OrchestratorState> {
  if (state?.run.status !== "RUNNING") return {};
  const node = state.run.nodes[payload.node_id];
  if (node?.state !== "RUNNING" || node.assigned_generation !== payload.generation) return {};
  const current = state.leases?.[payload.node_id];
  const wanted = lease.now.getTime() + payload.lease_seconds * 1000;
  const held =
    current && current.generation === payload.generation ? Date.parse(current.expires_at) : 0;
  if (held >= wanted) return {};
  const next: OrchestratorState = {
    ...state,
    leases: {
      ...leasesOf(state),
      [payload.node_id]: {
        generation: payload.generation,
        expires_at: new Date(wanted).toISOString(),
      },
    },
  };
  return { state: next, dueAt: dueAtOf(next, lease) };
}

function leasesOf(state: OrchestratorState): Readonly<Record<string, NodeLease>> {
  return state.leases ?? {};
}

/**
 * The lease of every RUNNING node after a transition: a fresh one for a node assigned by it, the
 * held one for a node still in the same assignment, a fresh one for a RUNNING node without one
 * (a state stored before leases). Nodes that left RUNNING lose theirs.
 */
function nextLeases(
  state: OrchestratorState,
  transition: Transition,
  lease: Leasing,
): Record<string, NodeLease> {
  const def = definitionOf(state);
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
    if (!assigned.has(nodeId) && kept && kept.generation === generation) {
      leases[nodeId] = kept;
      continue;
    }
    leases[nodeId] = {
      generation,
      expires_at: new Date(
        lease.now.getTime() + lease.leaseSeconds(roleOf(nodeId)) * 1000,
      ).toISOString(),
    };
  }
  return leases;
}

/**
 * When the run next needs the sweeper: the earliest lease expiry of a RUNNING node; with nothing
 * RUNNING but nodes held back, now + the nudge delay; otherwise never (null).
 */
export function dueAtOf(state: OrchestratorState, lease: Pick<Leasing, "now" | "nudgeSeconds">) {
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
  if (state.held.length > 0)
    return new Date(lease.now.getTime() + lease.nudgeSeconds * 1000).toISOString();
  return null;
}

/**
 * Turn a DAG transition into the next state and the envelopes to emit. A transition that only
 * reports ignored deliveries changes nothing and emits nothing.
 */
function apply(
  state: OrchestratorState,
  transition: Transition,
  cause: Envelope,
  lease: Leasing,
): Decision<OrchestratorState> {
  const at = lease.now.toISOString();
  const steps = transition.events.filter((e) => e.type !== "delivery.ignored");
  if (steps.length === 0 && transition.commands.length === 0 && sameHeld(state, transition))
    return {};
  const { run } = transition;
  const emit: EmitSpec[] = [];
  for (const command of transition.commands) {
    if (command.type !== "node.assign") continue;
    const payload: NodeRequested = {
      run_id: command.run_id,
      node_id: command.node_id,
      generation: command.generation,
      attempt: command.attempt,
      input: { ...command.input },
      run_input: command.run_input as NodeRequested["run_input"],
    };
    emit.push({ type: agentOf(command.role).requested, payload, orderKey: run.run_id });
  }
  for (const step of steps) {
    const type = RUN_END_EVENTS[step.type];
    if (type && "result" in step)
      emit.push({
        type,
        payload: { run_id: run.run_id, result: step.result },
        orderKey: run.run_id,
      });
  }
  const entries: TimelineEntry[] = steps.map((step) => ({
    at,
    event: step.type,
    ...("node_id" in step ? { node_id: step.node_id } : {}),
    ...("generation" in step ? { generation: step.generation } : {}),
    cause: cause.event_type,
  }));
  const next: OrchestratorState = {
    ...state,
    run,
    held: transition.held,
    timeline: [...state.timeline, ...entries].slice(-TIMELINE_LIMIT),
    leases: nextLeases(state, transition, lease),
  };
  return { state: next, emit, dueAt: dueAtOf(next, lease) };
}

function sameHeld(state: OrchestratorState, transition: Transition): boolean {
  return JSON.stringify(state.held) === JSON.stringify(transition.held);
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

function definitionOf(state: OrchestratorState): WorkflowDefinition {
  return contentWorkflowFor({ kind: state.workflow });
}

function agentOf(dagRole: string) {
  const entry = ROLE_TABLE[dagRole];
  if (!entry)
    throw new PermanentError(
      "workflow.unmapped_role",
      `no agent handles the DAG role ${dagRole} (add it to ROLE_TABLE)`,
      { details: { role: dagRole } },
    );
  return entry;
}

function isWorkflowKind(value: string): value is WorkflowKind {
  return (WORKFLOW_KINDS as readonly string[]).includes(value);
}

function toNodeError(error: NodeFailed["error"]) {
  return { code: error.code, message: error.message, error_class: error.errorClass };
}
