import { type Envelope, type EventType, tenantOf } from "../../../schemas";
import type { WorkflowDefinition } from "../../core/dag/definition";
import type { WorkflowRegistry } from "../../core/dag/registry";
import type { Capacity } from "../../core/dag/run";
import { DEFAULT_DEPENDENCY_TIMEOUT_SECONDS } from "../../core/dag/timeout";
import { type DescriptorOf, defineRole } from "../../core/define-role";
import type { EmitSpec } from "../../core/emit";
import { PermanentError } from "../../core/errors";
import type { Role } from "../../core/role";
import type { StepRoleTable } from "../../core/steps";
import { DAG_RUN_AGGREGATE } from "../../core/sweeper";
import type { QueueDepthSource } from "../../integrations/queue-depth/index";
import { RUN_ENDS } from "./apply";
import { catalogFor, type StepRoles, stepRoles, workflowCatalog } from "./catalog";
import { CHILD_EMITS } from "./child-commands";
import type { EventHandler, OrchestratorDecision, OrchestratorEmit } from "./context";
import { HANDLERS, handlersFor } from "./handlers";
import { dueAtOf, type LeasePolicy, type Leasing } from "./leases";
import { type OrchestratorState, parseRunState, summarizeRun } from "./state";

/**
 * The orchestrator (seed 001 §3, §6; DESIGN "Orchestration"): one consumer group that owns every
 * DAG run. A run is the aggregate `dag_run/<run_id>`; every event about it (the operator's
 * commands, the agents' outcomes, the sweeper's lease reports) carries `order_key = run_id`, so
 * the group's FIFO queue hands one run's events to one worker at a time and its updates are
 * serialized (the state revision condition catches anything that slips through).
 *
 * Decisions (pure apart from the optional queue-depth read; nothing here calls AWS):
 * - workflow.start.requested: a new run of the named workflow (a definition the stack was given
 *   with `workflows`, by its name or an alias, else the newest version registered for the run's
 *   tenant or for every tenant, which the run pins: ./catalog); one request per node the DAG releases, of the type its step
 *   role takes (./catalog: the stack's step roles). A start for a run that exists is a no-op
 *   (idempotent). An unknown workflow, or one with a node whose role is not a step role of the
 *   stack, is refused with `workflow.rejected` (business, no retry).
 * - `step.completed` / `step.failed` (any step role, naming itself), and the answers of a step
 *   role that spells its own (`<stem>.completed` / `<stem>.failed`, its entry in the table of
 *   step roles: ./handlers handlersFor): onNodeCompleted / onNodeFailed with the payload's
 *   generation (onItemCompleted / onItemFailed for an answer naming a map item, ./items for the
 *   map's lease). Duplicate, stale (older generation) or not-running deliveries are ignored by the
 *   DAG: nothing is emitted and the state is not written. Released downstream nodes become
 *   `<role>.requested`; when the run ends, `workflow.completed|partial|failed` with runResult.
 * - node.lease.expired: the outcome of the node's assignment is unknown (the request may still
 *   wait in the agent's queue, or its answer was lost): the same assignment is sent again
 *   (`redeliver`, same generation, `maxLeaseRedeliveries` times at most); after that, a failure
 *   of the node (code `agent_run.lease_expired`, transient) through onNodeFailed, gated on the
 *   generation like any other delivery, and the lost worker's late result is then ignored.
 * - workflow.rerun.requested: rerunFrom(node) (any node; a new generation). A blocked re-run or
 *   an unknown run or node -> `workflow.rejected`.
 * - workflow.reset.requested: the ManualReset of seed 001 §2.3 at the run level. Accepted only
 *   for a node that is FAILED (otherwise `workflow.rejected`, code workflow.reset_not_failed); the
 *   node and its descendants run again under a new generation (rerunFrom). Agent runs are keyed
 *   by generation, so the new assignment starts a fresh agent run at IDLE; the FAILED (or
 *   NEEDS_HUMAN) agent run of the old generation stays as the record of the failure and is never
 *   reassigned; its agent is told the assignment is closed (`<role>.cancel.requested`, reason
 *   reset), so a NEEDS_HUMAN agent run ends CANCELLED and no longer waits for a person.
 * - workflow.resolve.requested: HumanResolved at the run level. Accepted only for a FAILED node
 *   and an output that fits the node role's output schema (otherwise `workflow.rejected`:
 *   workflow.resolve_not_failed, workflow.invalid_output); the node counts as COMPLETED with that
 *   output under a new generation, without an agent, and the nodes below it run again; its agent
 *   is told the assignment is resolved (a NEEDS_HUMAN agent run ends COMPLETED).
 * - workflow.cancel.requested: cancelRun -> the run ends CANCELLED (every node not yet ended is
 *   CANCELLED), `workflow.cancelled` with the result so far, the request's reason and requester,
 *   and one `<role>.cancel.requested` per RUNNING node (READY or PENDING nodes were never sent to
 *   an agent). A cancel of a run already CANCELLED changes nothing (idempotent); of a run that
 *   ended otherwise, or of an unknown run, `workflow.rejected` (workflow.run_ended,
 *   workflow.unknown_run). The agents' late answers for the cancelled assignments are ignored by
 *   the DAG's delivery gate (not_running).
 * - workflow.release.requested: a release pass (for nodes that backpressure held back). When
 *   it releases nothing while nodes stay held, the state is still written with a new due time,
 *   so the sweeper nudges the run again later.
 * - node.heartbeat: the agent of a node has started on it (the first one) or is still working
 *   (a long model call); for the node's current generation while RUNNING, the first starts its
 *   lease (now + the larger of lease_seconds and the role's lease), later ones extend it to at
 *   least now + lease_seconds (state only, nothing emitted). Stale or unknown heartbeats are
 *   ignored.
 * - node.started, node.blocked, workflow.confirm.requested, node.confirm.expired: the agent of a
 *   node acknowledged it (RUNNING), is BLOCKED on an external confirmation, and how that ended
 *   (./agent).
 * - node.dependency.expired: a node waited for its inputs past its dependency timeout and ends
 *   FAILED (./waits).
 * - node.wait.expired, workflow.signal.requested: a wait node's time came (its timer, or its
 *   signal's deadline), or a signal for the run's wait nodes came (./wait-nodes, ./timers).
 * - workflow.child.start.requested, workflow.child.cancel.requested, workflow.child.ended: a
 *   child run started for a child node (idempotent on its run id), cancelled with its node's
 *   assignment, and its end handed to its parent's node (./children; what the DAG's child
 *   commands become: ./child-commands).
 * - workflow.child.approval.requested: a child's plan names roles that write, so the parent's
 *   node waits for a person's approval (workflow.confirm.requested on the node, or its deadline,
 *   node.confirm.expired) before the child starts (./plan-approval).
 *
 * Where it lives: the handler of each event type in ./handlers (payloads as the
 * pipeline validated them, typed by the registry; reset and resolve in ./resolve,
 * what handlers share in ./context), the stored state's schema in
 * ./state, leases and the due time in ./leases, a DAG transition turned
 * into a decision in ./apply, the workflows it knows and its step roles in ./catalog.
 *
 *
 * Leases and the due index (./leases): every node released to an agent gets a lease
 * in `leases`: `queuedLeaseSeconds` while its request waits in the agent's queue, then, from the
 * agent's first heartbeat, `leaseSeconds` (per node role, that is per agent, in `leaseSecondsByRole`); it goes when
 * the node leaves RUNNING.
 * Each state write carries `dueAt` (the state table's by-due index): the earliest lease expiry
 * of a RUNNING node; with no work in flight (nothing RUNNING, or a map none of whose items is)
 * but nodes held, now + `releaseNudgeSeconds`; else none. A later time than the stored one is
 * written only once the stored one has passed (`withDueKept`).
 * The lease sweeper (functions/core/sweeper.ts) reads that index and sends `node.lease.expired`
 * or `workflow.release.requested`. A lease report is ignored when the node's lease was extended
 * past the reported expiry and has not run out yet (a heartbeat crossed the report).
 *
 * Backpressure: per-role caps come from the workflow definition (`concurrency.perRole`, applied
 * by the DAG on every release pass). A pure role cannot see queue depths, so queue-depth gating
 * needs an injected depth source: `orchestratorRole({ queueDepth })` asks it for the depth of
 * each agent group's queue before a decision and the DAG holds new work for a group whose depth
 * (plus what the pass released) reaches `queueDepthThreshold`. Held nodes stay READY and go out
 * on the run's next event; when nothing of the run is RUNNING any more, a scheduler must send
 * `workflow.release.requested` for runs with held nodes (listed in the state's `held`).
 *
 * Every `node.cancel` command of the DAG (a cancelled run, or a re-run or reset while nodes of the
 * old generation are RUNNING) becomes `<role>.cancel.requested` on the run's stream: the agent's
 * command channel (seed 001 §4). The agent drops a request for that assignment it has not started
 * and ends one in progress CANCELLED; whatever it still answers for it is ignored by the DAG
 * (not_running or stale_generation).
 */

export const DEFAULT_QUEUE_DEPTH_THRESHOLD = 100;
export const DEFAULT_LEASE_SECONDS = 900;
export const DEFAULT_QUEUED_LEASE_SECONDS = 4 * 3600;
export const DEFAULT_LEASE_REDELIVERIES = 2;
export const DEFAULT_RELEASE_NUDGE_SECONDS = 30;

export interface OrchestratorOptions {
  /** Where queue depths come from (e.g. SQS ApproximateNumberOfMessages); none = no gate. */
  readonly queueDepth?: QueueDepthSource;
  /** Depth at which release of new work for a group stops. @default 100 */
  readonly queueDepthThreshold?: number;
  /** Lease of a node whose agent has started on it, in seconds, from the start. @default 900 */
  readonly leaseSeconds?: number;
  /** How long a request may wait in its agent's queue before its outcome counts as unknown.
   * @default 14400 (4 hours) */
  readonly queuedLeaseSeconds?: number;
  /** How many times an assignment whose lease ran out is sent again before its node fails.
   * @default 2 */
  readonly maxLeaseRedeliveries?: number;
  /** Lease per node role (the agent, e.g. `writing`), overriding `leaseSeconds`. */
  readonly leaseSecondsByRole?: Readonly<Record<string, number>>;
  /** With no work in flight and nodes held, how soon the sweeper nudges the run. @default 30 */
  readonly releaseNudgeSeconds?: number;
  /** How long a node may wait for its inputs when neither it nor its workflow says.
   * @default 86400 (a day) */
  readonly dependencyTimeoutSeconds?: number;
  /**
   * The stack's step roles (the table the stack writes to `STEP_ROLES` from its role modules;
   * `stepRolesOf(modules)` in memory), whose leases join `leaseSecondsByRole`. @default none
   */
  readonly stepRoles?: StepRoleTable;
  /** The stack's workflows (scope `stack`), each version a run may be on. @default none */
  readonly workflows?: readonly WorkflowDefinition[];
  /**
   * The workflows registered at run time (functions/core/dag/registry.ts), which a start finds
   * after the compiled-in ones. @default none
   */
  readonly registry?: WorkflowRegistry;
}

export const ORCHESTRATOR_GROUP = "orchestrator";

/**
 * Every event type the orchestrator takes whatever its stack (the stack adds the answers of its
 * step roles that spell their own: `orchestratorSubscriptions`).
 */
// The table's keys: typed as any registered type.
export const ORCHESTRATOR_SUBSCRIPTIONS = Object.keys(HANDLERS) as EventType[];

/** What the orchestrator of a stack with these step roles subscribes to. */
export function orchestratorSubscriptions(table: StepRoleTable): EventType[] {
  return Object.keys(handlersFor(table)) as EventType[];
}

/**
 * What the orchestrator emits: each step role's commands, how a run ended, and a refusal of a
 * request (`workflow.rejected`, thrown as a BusinessRejection and committed by the pipeline). The
 * descriptor lists none of the commands; the built role those of its stack's step roles.
 */
function emitsFor(table: StepRoleTable): readonly (OrchestratorEmit | "workflow.rejected")[] {
  // The step roles' types are registered by their modules: known at run time only.
  const commands = Object.values(table).flatMap(({ requested, cancel, confirm }) =>
    confirm === undefined ? [requested, cancel] : [requested, cancel, confirm],
  ) as OrchestratorEmit[];
  return [...new Set([...commands, ...RUN_ENDS, ...CHILD_EMITS, "workflow.rejected"] as const)];
}
/**
 * Every event the orchestrator reads names its run (the aggregate it reads and writes) in its
 * payload's `run_id`, a step role's own answers too.
 */
export const ORCHESTRATOR: DescriptorOf<EventType, OrchestratorEmit | "workflow.rejected"> = {
  group: ORCHESTRATOR_GROUP,
  subscriptions: ORCHESTRATOR_SUBSCRIPTIONS,
  emits: emitsFor({}),
  stateOf: (event) => ({ type: DAG_RUN_AGGREGATE, id: runIdOf(event) }),
  // A child run's start and cancel come on its parent's stream, its end on its own: a dag_run
  // stream's events go to several runs (./children).
  sharedStreams: [DAG_RUN_AGGREGATE],
  // An agent's acknowledgement and heartbeat change nothing when they come again (./agent,
  // ./leases): an acknowledgement counts once per assignment (a repeat finds the lease started,
  // or the node no longer RUNNING under its generation), and a heartbeat only extends the lease
  // of its node RUNNING under its generation, never shortens it, as a late one would anyway. The
  // agent sends a new one (a new id) whenever its request is delivered again, so the run already
  // meets repeats the ids would not catch: keeping ids for them bought nothing but bytes.
  repeatableTypes: ["node.started", "node.heartbeat"],
};

export function orchestratorRole(options: OrchestratorOptions = {}): Role<OrchestratorState> {
  const steps = stepRoles(options.stepRoles);
  const policy = leasePolicyOf(options, steps);
  const capacityFor = capacitySource(options);
  const compiled = workflowCatalog(options.workflows);
  const handlers = handlersFor(steps.table);
  return defineRole<OrchestratorState, EventType, OrchestratorEmit | "workflow.rejected">({
    ...ORCHESTRATOR,
    subscriptions: Object.keys(handlers) as EventType[],
    emits: emitsFor(steps.table),
    summarize: summarizeRun,
    // The operator's commands, the sweeper's reports and the agents' heartbeats are obeyed in the
    // run's tenant only (a run that names none: the default tenant's).
    tenantOfState: tenantOf,
    // A run's state (3-4 KB of JSON, written on every event of the run) is read only through
    // AgentBus: the operator tools and the console.
    compactState: true,
    decide: async (data, event, { now, stored }) => {
      const handler = handlerOf(handlers, event);
      const state = parseRunState(data);
      const run = state && {
        workflow: state.run.workflow,
        scope: state.definition_scope,
        plan: state.plan,
      };
      const leasing = { now, policy };
      const decided = await handler.decide({
        state,
        event,
        leasing,
        capacityFor,
        workflows: await catalogFor(compiled, options.registry, run),
        stepRoles: steps,
      });
      const decision = withDueKept(decided, state, stored?.dueAt, leasing);
      return withParentRun(decision, parentRunOf(decision.state ?? state, event));
    },
  });
}

/**
 * The due time a decision writes, given the one the run's state has (`stored`): a run's due time
 * is the earliest moment the sweeper may have work for it, and only that. An earlier one is
 * written at once; a later one only once the stored one has passed, so that while the run's
 * nodes go to their agents, start and answer one after another (each moving the earliest lease),
 * the state table's by-due index keeps one entry instead of moving it at every step. When the
 * stored time comes with nothing due, the sweeper nudges the run (`workflow.release.requested`)
 * and its next write, that one or any other, sets the true time. A decision that writes no state
 * is given one when the stored time has passed and the true time is another.
 */
function withDueKept(
  decision: OrchestratorDecision,
  current: OrchestratorState | undefined,
  stored: string | undefined,
  leasing: Leasing,
): OrchestratorDecision {
  const passed = stored === undefined || Date.parse(stored) <= leasing.now.getTime();
  if (decision.state === undefined) {
    if (!current || stored === undefined || !passed) return decision;
    const dueAt = dueAtOf(current, leasing);
    return dueAt === stored ? decision : { ...decision, state: current, dueAt };
  }
  const wanted = decision.dueAt;
  if (passed || typeof wanted !== "string" || Date.parse(wanted) <= Date.parse(stored))
    return decision;
  return { ...decision, dueAt: stored };
}

/**
 * The parent of the run an event is about: the run's (a child run's state names it), else, for
 * the request to start a child run that does not exist (yet), the one the request names.
 */
function parentRunOf(state: OrchestratorState | undefined, event: Envelope): string | null {
  if (state?.parent) return state.parent.run_id;
  if (state || event.event_type !== "workflow.child.start.requested") return null;
  const named = (event.payload as { parent_run_id?: unknown }).parent_run_id;
  return typeof named === "string" ? named : null;
}

/**
 * Every event of a child run (its steps' requests included) names its parent run as
 * `parent_run_id`; the events of a run without a parent name none, even when a child run's end
 * caused them.
 */
function withParentRun<D extends { readonly emit?: readonly EmitSpec[] }>(
  decision: D,
  parentRunId: string | null,
): D {
  if (!decision.emit) return decision;
  return { ...decision, emit: decision.emit.map((spec) => ({ ...spec, parentRunId })) };
}

/** The orchestrator with per-role caps from the definitions and no queue-depth gate. */
export const orchestrator: Role<OrchestratorState> = orchestratorRole();

function handlerOf(
  handlers: Readonly<Record<string, EventHandler>>,
  event: Envelope,
): EventHandler {
  const handler = handlers[event.event_type];
  if (!handler)
    throw new PermanentError(
      "orchestrator.unhandled",
      `the orchestrator cannot handle ${event.event_type}`,
    );
  return handler;
}

/**
 * The run an event names: its handler's reading of it; for a step role's own answer (a type of
 * the stack's, no handler here), the run its node names (`run_id`, `node_id`, `generation`).
 */
function runIdOf(event: Envelope): string {
  const known = HANDLERS[event.event_type];
  if (known) return known.runOf(event);
  const node = event.payload as Partial<Record<"run_id" | "node_id" | "generation", unknown>>;
  const answer =
    typeof node?.run_id === "string" &&
    typeof node.node_id === "string" &&
    typeof node.generation === "number";
  if (answer) return node.run_id as string;
  throw new PermanentError(
    "orchestrator.unhandled",
    `the orchestrator cannot handle ${event.event_type}`,
  );
}

/**
 * The lease options, checked (each a positive number of seconds) and with their defaults; a step
 * role's own lease applies unless `leaseSecondsByRole` names the role.
 */
function leasePolicyOf(options: OrchestratorOptions, steps: StepRoles): LeasePolicy {
  const defaultLease = seconds(options.leaseSeconds, "leaseSeconds", DEFAULT_LEASE_SECONDS);
  const byRole: Record<string, number> = {};
  for (const [role, entry] of Object.entries(steps.table))
    if (entry.lease_seconds !== undefined) byRole[role] = entry.lease_seconds;
  for (const [role, value] of Object.entries(options.leaseSecondsByRole ?? {}))
    byRole[role] = seconds(value, `leaseSecondsByRole.${role}`, DEFAULT_LEASE_SECONDS);
  return {
    leaseSeconds: (role) => (role !== undefined ? byRole[role] : undefined) ?? defaultLease,
    queuedSeconds: seconds(
      options.queuedLeaseSeconds,
      "queuedLeaseSeconds",
      DEFAULT_QUEUED_LEASE_SECONDS,
    ),
    maxRedeliveries: redeliveriesOf(options.maxLeaseRedeliveries),
    nudgeSeconds: seconds(
      options.releaseNudgeSeconds,
      "releaseNudgeSeconds",
      DEFAULT_RELEASE_NUDGE_SECONDS,
    ),
    dependencySeconds: seconds(
      options.dependencyTimeoutSeconds,
      "dependencyTimeoutSeconds",
      DEFAULT_DEPENDENCY_TIMEOUT_SECONDS,
    ),
  };
}

function redeliveriesOf(value: number | undefined): number {
  const v = value ?? DEFAULT_LEASE_REDELIVERIES;
  if (!Number.isInteger(v) || v < 0)
    throw new PermanentError(
      "orchestrator.invalid_option",
      `maxLeaseRedeliveries must be a whole number, at least 0, got ${v}`,
    );
  return v;
}

function seconds(value: number | undefined, what: string, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isFinite(v) || v <= 0)
    throw new PermanentError(
      "orchestrator.invalid_option",
      `${what} must be a positive number of seconds, got ${v}`,
    );
  return v;
}

/** The capacity of a release pass: the queue depth of each agent the workflow uses, when known. */
function capacitySource(
  options: OrchestratorOptions,
): (def: WorkflowDefinition) => Promise<Capacity> {
  return async (def) => {
    if (!options.queueDepth) return {};
    const agents = [...new Set(def.nodes.flatMap((node) => node.role ?? []))].sort();
    const depth = await options.queueDepth(agents);
    const queueDepth = Object.fromEntries(agents.map((agent) => [agent, depth[agent] ?? 0]));
    return { queueDepth, threshold: options.queueDepthThreshold ?? DEFAULT_QUEUE_DEPTH_THRESHOLD };
  };
}
