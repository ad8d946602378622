import { createHash } from "node:crypto";
import { encodeTime } from "ulid";
import type { Envelope, EventRegistry, Topic } from "../../schemas";
import { CONVERSATION_AGGREGATE } from "../../schemas/events/conversation";
import type { WorkflowReleaseRequested } from "../../schemas/events/workflow";
import { AGENT_RUN_AGGREGATE } from "./agent/agent-role";
import { hasWorkInFlight } from "./dag/map";
import { PermanentError } from "./errors";
import type { StoredState } from "./ports";

/**
 * The lease sweeper's decisions, pure: from the states of the DAG runs and agent runs the due
 * index listed and the time, the messages to put on the bus.
 *
 * - A node RUNNING under a lease (same generation as its assignment) that has run out
 *   (`expires_at <= now`) -> `node.lease.expired` {run_id, node_id, generation, expired_at =
 *   the lease's expires_at}. The orchestrator fails the node (transient, agent_run.lease_expired).
 * - A RUNNING node whose agent run is BLOCKED (its lease's `blocked`, no outcome sent yet) past
 *   its `confirm_by` -> `node.confirm.expired` {run_id, node_id, generation, confirm_by}: the
 *   orchestrator tells the agent its confirmation timed out (ExternalConfirmTimeout). The same
 *   for a RUNNING child node whose plan waits for a person's approval (the state's
 *   `plan_approvals`, undecided) past its `deadline` (as `confirm_by`): the node fails.
 * - A PENDING or READY node past its dependency deadline (the state's `waits`) ->
 *   `node.dependency.expired` {run_id, node_id, generation, due_at}: the node ends FAILED.
 * - A RUNNING wait node whose time came (the state's `timers`, for its assignment) ->
 *   `node.wait.expired` {run_id, node_id, generation, due_at}: a timer completes it, a signal's
 *   deadline fails it.
 * - A RUNNING run with no work in flight (no RUNNING node, but for a map node none of whose items
 *   is RUNNING) but nodes held back by backpressure -> `workflow.release.requested` {run_id}. The
 *   same for a RUNNING run whose due time came with none of the above due: the orchestrator keeps
 *   a run's due time as early as any of its steps wanted it until it passes (`withDueKept` in
 *   functions/roles/orchestrator/orchestrator.ts), and its next write sets the true one.
 * - An agent run (functions/core/agent) BLOCKED on an approval past its deadline -> its agent's
 *   decision command with decision `deadline` {run_id, tool_call_id}: the call is refused or the
 *   run fails, as the tool says. The same for a run BLOCKED on outside work its call started (an
 *   MCP task), whose deadline is its next poll: the run polls it (functions/core/agent/task-wait.ts).
 * - A conversation holding messages for an earlier client sequence, due (its wait is over) ->
 *   `conversation.hold.expired` {conversation_id, due_at}: it applies them without the gap.
 * Anything else (the index is eventually consistent, so a listed run may be done or extended) is
 * left alone. Each message is in the tenant of the run it is about (the state's `tenant_id`),
 * whose consumers obey it in that tenant only (Role.tenantOfState): what it causes stays there,
 * and it travels in that tenant's FIFO lane.
 *
 * Event ids are deterministic, so sweeping the same state again (the next minute, a retried
 * invocation, two sweepers at once) sends the same ids and the orchestrator's inbox drops the
 * repeats: a lease report's id is derived from (run, node, generation, expires_at), a release
 * nudge's from (run, state revision); the orchestrator writes the state on every nudge that
 * leaves nodes held, so the next nudge gets a new id. Such an id is a ULID in form
 * (`deterministicUlid`): its time part is the lease expiry (for a nudge the run's due time, or
 * 0 when the reader did not give it) and
 * its 80 "random" bits are the first 80 bits of a SHA-256 of the key. It is unique as long as
 * the keys are, and it sorts by that time rather than by creation.
 *
 * A report's `attempt` is the sweep that sends it: 1 for the first sweep at or after its due time,
 * then one more for each period of the schedule (`rateSeconds`) since, as a report the
 * orchestrator has not acted on yet goes out again (same id) on every sweep. The sweeper keeps no
 * count of its own, so the schedule's period stands in for one: a retried invocation in the same
 * period sends the same attempt again.
 */

/** The sweeper's name: the producer of what it sends, and the `service` of its metrics. */
export const SWEEPER_PRODUCER = "lease-sweeper";
/** Published by every sweep that got as far as its plan (the count of lease reports). */
export const LEASE_EXPIRED_METRIC = "LeaseExpired";
/** The sweeper's count of waits for a person whose deadline is near (an alarm watches it). */
export const APPROVAL_DEADLINE_NEAR_METRIC = "ApprovalDeadlineNear";
/** How often the schedule runs the sweeper unless told otherwise (the construct's default). */
export const DEFAULT_SWEEP_RATE_SECONDS = 60;
export const DAG_RUN_AGGREGATE = "dag_run";

export interface SweepItem {
  readonly run_id: string;
  readonly event_type:
    | "node.lease.expired"
    | "workflow.release.requested"
    | "node.confirm.expired"
    | "node.dependency.expired"
    | "node.wait.expired";
  readonly node_id?: string;
}

export interface SweepPlan {
  /** What to publish, each with its topic (from the registry). */
  readonly messages: readonly { readonly topic: Topic; readonly envelope: Envelope }[];
  /** Listed aggregates that needed nothing (not a DAG run, ended, or not due any more). */
  readonly skipped: number;
}

/**
 * What the sweeper reads of a DAG run's state (the orchestrator's SweptRunState; stated here
 * structurally because the core does not depend on the roles).
 */
export interface SweptRunState {
  readonly run: {
    readonly run_id: string;
    readonly status: string;
    readonly nodes: Readonly<
      Record<
        string,
        {
          readonly state: string;
          readonly assigned_generation?: number;
          /** A map node's items. */
          readonly items?: readonly { readonly state: string }[];
        }
      >
    >;
  };
  readonly held: readonly unknown[];
  readonly leases?: Readonly<
    Record<
      string,
      {
        readonly generation: number;
        readonly expires_at: string;
        readonly blocked?: { readonly confirm_by: string; readonly outcome?: string };
      }
    >
  >;
  readonly waits?: Readonly<
    Record<string, { readonly generation: number; readonly due_at: string }>
  >;
  /** The time of each RUNNING wait node's assignment. */
  readonly timers?: Readonly<
    Record<string, { readonly generation: number; readonly due_at: string }>
  >;
  /** The approval each RUNNING child node's plan waits for, until its deadline. */
  readonly plan_approvals?: Readonly<
    Record<
      string,
      { readonly generation: number; readonly deadline: string; readonly decision?: unknown }
    >
  >;
  readonly origin?: { readonly correlation_id: string; readonly task_id: string };
  /** The tenant whose run it is (absent: the default tenant). */
  readonly tenant_id?: string;
}

/**
 * What the sweeper reads of an agent run's journal (functions/core/agent/agent.ts), stated here
 * structurally: a run BLOCKED on an approval whose deadline passed is sent its agent's decision
 * command with decision `deadline`, which settles the call as the tool says (person.ts).
 */
export interface SweptAgentRun {
  readonly run_id: string;
  readonly task_id: string;
  readonly status: string;
  readonly decision_type: string;
  readonly correlation_id: string;
  readonly waiting?: {
    readonly kind?: string;
    readonly tool_call_id?: string;
    readonly deadline?: string;
  };
  /** The tenant whose run it is (absent: the default tenant). */
  readonly tenant_id?: string;
}

/**
 * What the sweeper reads of a conversation that holds messages for an earlier client sequence
 * (the customer-support conversation's state), stated here structurally: once the lowest held
 * message's wait is over it is sent `conversation.hold.expired`.
 */
export interface SweptConversation {
  readonly conversation_id: string;
  readonly held: readonly {
    readonly event_id: string;
    readonly correlation_id: string;
    readonly task_id: string;
  }[];
  /** The tenant whose conversation it is (absent: the default tenant). */
  readonly tenant_id?: string;
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * A ULID-shaped id that is a function of `key`: 10 characters of `timeMs` (as a ULID's time
 * part) and 16 characters from the first 80 bits of SHA-256(key).
 */
export function deterministicUlid(key: string, timeMs: number): string {
  const digest = createHash("sha256").update(key).digest();
  let bits = 0n;
  for (let i = 0; i < 10; i++) bits = (bits << 8n) | BigInt(digest[i] ?? 0);
  let random = "";
  for (let i = 15; i >= 0; i--) random += CROCKFORD[Number((bits >> BigInt(i * 5)) & 31n)];
  return encodeTime(Math.max(0, Math.floor(timeMs)), 10) + random;
}

/**
 * The states a sweep acts on, by aggregate type: DAG runs (leases, deadlines, waits, releases),
 * agent runs (approval deadlines) and conversations (a message held for one before it). A due
 * state of another type is not loaded.
 */
export const SWEPT_AGGREGATES: ReadonlySet<string> = new Set([
  DAG_RUN_AGGREGATE,
  AGENT_RUN_AGGREGATE,
  CONVERSATION_AGGREGATE,
]);

/** The plan for one sweep. Throws PermanentError if it would build an invalid envelope. */
export function planSweep(
  states: readonly StoredState<unknown>[],
  now: Date,
  registry: EventRegistry,
  rateSeconds = DEFAULT_SWEEP_RATE_SECONDS,
): SweepPlan {
  const messages: { topic: Topic; envelope: Envelope }[] = [];
  const sweep: Sweep = { now, registry, rateSeconds };
  let skipped = 0;
  for (const stored of states) {
    const before = messages.length;
    if (stored.aggregate.type === DAG_RUN_AGGREGATE && isRunState(stored.data))
      messages.push(...planRun(stored as StoredState<SweptRunState>, sweep));
    if (stored.aggregate.type === AGENT_RUN_AGGREGATE && isAgentRun(stored.data))
      messages.push(...planAgentRun(stored as StoredState<SweptAgentRun>, sweep));
    if (stored.aggregate.type === CONVERSATION_AGGREGATE && isHolding(stored.data))
      messages.push(...planConversation(stored as StoredState<SweptConversation>, sweep));
    if (messages.length === before) skipped++;
  }
  return { messages, skipped };
}

type Planned = { topic: Topic; envelope: Envelope };

/** One sweep: its time, the registry it builds with and the schedule's period. */
interface Sweep {
  readonly now: Date;
  readonly registry: EventRegistry;
  readonly rateSeconds: number;
}

/** The sweep's attempt at a report due at `dueMs` (see the module comment). */
export function sweepAttempt(dueMs: number, now: Date, rateSeconds: number): number {
  const late = now.getTime() - dueMs;
  if (!Number.isFinite(late) || late <= 0 || !(rateSeconds > 0)) return 1;
  return Math.floor(late / (rateSeconds * 1000)) + 1;
}

function planRun(stored: StoredState<SweptRunState>, sweep: Sweep): Planned[] {
  const state = stored.data;
  const run = state.run;
  if (run.status !== "RUNNING") return [];
  const out: Planned[] = [];
  let running = 0;
  for (const [nodeId, node] of Object.entries(run.nodes).sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (hasWorkInFlight(node)) running++;
    out.push(...planNode(stored, nodeId, node, sweep));
  }
  const duePassed = stored.dueAt !== undefined && Date.parse(stored.dueAt) <= sweep.now.getTime();
  if ((running === 0 && state.held.length > 0) || (out.length === 0 && duePassed)) {
    const payload: WorkflowReleaseRequested = { run_id: run.run_id };
    const dueMs = stored.dueAt ? Date.parse(stored.dueAt) : 0;
    const id = deterministicUlid(
      `workflow.release.requested\u0000${run.run_id}\u0000${stored.revision}`,
      dueMs,
    );
    // Without a due time there is nothing to count sweeps from: the first attempt.
    const attempt = stored.dueAt ? sweepAttempt(dueMs, sweep.now, sweep.rateSeconds) : 1;
    out.push(
      build("workflow.release.requested", id, payload, {
        to: runAddressee(stored),
        sweep,
        attempt,
      }),
    );
  }
  return out;
}

/**
 * What one node of a RUNNING run needs: a dependency, wait, confirmation or lease report, or
 * nothing.
 */
function planNode(
  stored: StoredState<SweptRunState>,
  nodeId: string,
  node: SweptRunState["run"]["nodes"][string],
  sweep: Sweep,
): Planned[] {
  const state = stored.data;
  const due = (iso: string) => Date.parse(iso) <= sweep.now.getTime();
  const report = (type: string, generation: number, field: string, at: string) => {
    const payload = { run_id: state.run.run_id, node_id: nodeId, generation, [field]: at };
    const id = deterministicUlid(
      `${type}\u0000${state.run.run_id}\u0000${nodeId}\u0000${generation}\u0000${at}`,
      Date.parse(at),
    );
    const attempt = sweepAttempt(Date.parse(at), sweep.now, sweep.rateSeconds);
    return build(type, id, payload, { to: runAddressee(stored), sweep, attempt });
  };
  if (node.state === "PENDING" || node.state === "READY") {
    const wait = state.waits?.[nodeId];
    return wait && due(wait.due_at)
      ? [report("node.dependency.expired", wait.generation, "due_at", wait.due_at)]
      : [];
  }
  const approval = pendingPlanApproval(state, nodeId, node);
  if (approval)
    return due(approval.deadline)
      ? [report("node.confirm.expired", approval.generation, "confirm_by", approval.deadline)]
      : [];
  const timer = state.timers?.[nodeId];
  if (timer && node.state === "RUNNING" && timer.generation === node.assigned_generation)
    return due(timer.due_at)
      ? [report("node.wait.expired", timer.generation, "due_at", timer.due_at)]
      : [];
  const lease = state.leases?.[nodeId];
  if (node.state !== "RUNNING" || !lease || lease.generation !== node.assigned_generation)
    return [];
  const out: Planned[] = [];
  const blocked = lease.blocked;
  if (blocked && !blocked.outcome && due(blocked.confirm_by))
    out.push(report("node.confirm.expired", lease.generation, "confirm_by", blocked.confirm_by));
  if (due(lease.expires_at))
    out.push(report("node.lease.expired", lease.generation, "expired_at", lease.expires_at));
  return out;
}

/** The undecided approval the plan of a RUNNING child node waits for, in its assignment. */
function pendingPlanApproval(
  state: SweptRunState,
  nodeId: string,
  node: SweptRunState["run"]["nodes"][string],
): { readonly generation: number; readonly deadline: string } | undefined {
  const approval = state.plan_approvals?.[nodeId];
  if (!approval || approval.decision !== undefined || node.state !== "RUNNING") return undefined;
  return approval.generation === node.assigned_generation ? approval : undefined;
}

/**
 * Where a sweep message goes and whose it is: the aggregate at version 0, its task and chain, and
 * its tenant (none: the default tenant).
 */
interface Addressee {
  readonly aggregate: { readonly type: string; readonly id: string };
  readonly correlationId: string;
  readonly taskId: string;
  readonly tenantId?: string;
}

/** The addressee of a DAG run's messages: the run, and the chain it began (its origin). */
function runAddressee(stored: StoredState<SweptRunState>): Addressee {
  const runId = stored.data.run.run_id;
  const token = runId.slice(runId.indexOf("_") + 1);
  return {
    aggregate: { type: stored.aggregate.type, id: runId },
    correlationId: stored.data.origin?.correlation_id ?? `corr_${token}`,
    taskId: stored.data.origin?.task_id ?? `task_${token}`,
    ...(stored.data.tenant_id === undefined ? {} : { tenantId: stored.data.tenant_id }),
  };
}

function build(
  type: string,
  eventId: string,
  payload: unknown,
  at: { to: Addressee; sweep: Sweep; attempt: number },
): { topic: Topic; envelope: Envelope } {
  const { to, attempt } = at;
  const { now, registry } = at.sweep;
  const candidate = {
    event_id: eventId,
    event_type: type,
    schema_version: latestVersion(registry, type),
    occurred_at: now.toISOString(),
    correlation_id: to.correlationId,
    causation_id: null,
    task_id: to.taskId,
    ...(to.tenantId === undefined ? {} : { tenant_id: to.tenantId }),
    aggregate: { ...to.aggregate, version: 0 },
    order_key: to.aggregate.id,
    producer: SWEEPER_PRODUCER,
    attempt,
    payload,
  };
  const parsed = registry.parse(candidate);
  if (!parsed.ok)
    throw new PermanentError(
      "sweeper.invalid_envelope",
      `the sweeper built an invalid ${type} for ${to.aggregate.type} ${to.aggregate.id}: ${parsed.message}`,
    );
  return { topic: parsed.definition.topic, envelope: parsed.envelope };
}

function latestVersion(registry: EventRegistry, type: string): number {
  const versions = registry
    .definitions()
    .filter((d) => d.type === type)
    .map((d) => d.schemaVersion);
  if (versions.length === 0)
    throw new PermanentError("sweeper.unknown_type", `${type} is not registered`);
  return Math.max(...versions);
}

/** An agent run BLOCKED past its approval's deadline: its decision command, `deadline`. */
function planAgentRun(stored: StoredState<SweptAgentRun>, sweep: Sweep): Planned[] {
  const run = stored.data;
  const deadline = run.waiting?.deadline;
  const callId = run.waiting?.tool_call_id;
  if (run.status !== "BLOCKED" || !deadline || !callId) return [];
  const dueMs = Date.parse(deadline);
  if (!(dueMs <= sweep.now.getTime())) return [];
  const id = deterministicUlid(
    `deadline\u0000${run.run_id}\u0000${callId}\u0000${deadline}`,
    dueMs,
  );
  const payload = {
    run_id: run.run_id,
    tool_call_id: callId,
    decision: "deadline",
    requested_by: SWEEPER_PRODUCER,
  };
  const to: Addressee = {
    aggregate: { type: AGENT_RUN_AGGREGATE, id: run.run_id },
    correlationId: run.correlation_id,
    taskId: run.task_id,
    ...(run.tenant_id === undefined ? {} : { tenantId: run.tenant_id }),
  };
  return [
    build(run.decision_type, id, payload, {
      to,
      sweep,
      attempt: sweepAttempt(dueMs, sweep.now, sweep.rateSeconds),
    }),
  ];
}

/**
 * A conversation whose held messages' wait is due (`dueAt`, the index's): the nudge, in the chain
 * and task of the lowest held message, its id from (conversation, due time).
 */
function planConversation(stored: StoredState<SweptConversation>, sweep: Sweep): Planned[] {
  const state = stored.data;
  const first = state.held[0];
  const dueAt = stored.dueAt;
  const dueMs = dueAt === undefined ? Number.NaN : Date.parse(dueAt);
  if (!first || dueAt === undefined || !(dueMs <= sweep.now.getTime())) return [];
  const id = deterministicUlid(`hold\u0000${state.conversation_id}\u0000${dueAt}`, dueMs);
  const to: Addressee = {
    aggregate: { type: CONVERSATION_AGGREGATE, id: state.conversation_id },
    correlationId: first.correlation_id,
    taskId: first.task_id,
    ...(state.tenant_id === undefined ? {} : { tenantId: state.tenant_id }),
  };
  const payload = { conversation_id: state.conversation_id, due_at: dueAt };
  const attempt = sweepAttempt(dueMs, sweep.now, sweep.rateSeconds);
  return [build("conversation.hold.expired", id, payload, { to, sweep, attempt })];
}

function isHolding(data: unknown): data is SweptConversation {
  const d = data as Partial<SweptConversation> | null | undefined;
  return !!d && typeof d.conversation_id === "string" && Array.isArray(d.held) && d.held.length > 0;
}

function isAgentRun(data: unknown): data is SweptAgentRun {
  const d = data as Partial<SweptAgentRun> | null | undefined;
  return (
    !!d &&
    typeof d.run_id === "string" &&
    typeof d.task_id === "string" &&
    typeof d.decision_type === "string" &&
    typeof d.correlation_id === "string"
  );
}

function isRunState(data: unknown): data is SweptRunState {
  const d = data as Partial<SweptRunState> | null | undefined;
  return (
    !!d &&
    typeof d === "object" &&
    !!d.run &&
    typeof d.run === "object" &&
    typeof d.run.run_id === "string" &&
    typeof d.run.nodes === "object" &&
    Array.isArray(d.held)
  );
}

/**
 * How many waits for a person end within `windowMs` after `now` (not yet past): agent runs
 * BLOCKED on an approval whose deadline is that close, and nodes of RUNNING DAG runs BLOCKED on
 * a confirmation whose `confirm_by` is, or waiting for a plan's approval whose deadline is. The sweeper publishes it each sweep (`ApprovalDeadlineNear`)
 * so that a person is warned before the deadline decides for them.
 */
export function deadlinesNear(
  states: readonly StoredState<unknown>[],
  now: Date,
  windowMs: number,
): number {
  const near = (iso: string | undefined) => {
    const at = iso === undefined ? Number.NaN : Date.parse(iso);
    return at > now.getTime() && at <= now.getTime() + windowMs;
  };
  let count = 0;
  for (const { aggregate, data } of states) {
    if (aggregate.type === AGENT_RUN_AGGREGATE && isAgentRun(data)) {
      // A run waiting for outside work (`task`) waits for nobody: its deadline is its next poll.
      const person = data.waiting?.kind !== "task";
      if (data.status === "BLOCKED" && person && near(data.waiting?.deadline)) count++;
    } else if (aggregate.type === DAG_RUN_AGGREGATE && isRunState(data)) {
      if (data.run.status !== "RUNNING") continue;
      for (const [nodeId, node] of Object.entries(data.run.nodes)) {
        if (near(pendingPlanApproval(data, nodeId, node)?.deadline)) count++;
        const lease = data.leases?.[nodeId];
        const blocked = lease?.blocked;
        if (node.state !== "RUNNING" || lease?.generation !== node.assigned_generation) continue;
        if (blocked && !blocked.outcome && near(blocked.confirm_by)) count++;
      }
    }
  }
  return count;
}
