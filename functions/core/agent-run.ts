import { type Envelope, letterDigest } from "../../schemas";
import {
  type AgentRun,
  BUDGET_EXHAUSTED,
  DEFAULT_CONFIRM_SECONDS,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_MAX_ATTEMPTS,
  HISTORY_LIMIT,
  type HistoryEntry,
  IllegalTransitionError,
  MODEL_INVALID_OUTPUT,
  parseRun,
  RunError,
  type RunState,
  type RunTrigger,
  TRANSITIONS,
  TRIGGERS,
} from "./agent-run-model";
import { describe, PermanentError } from "./errors";

export * from "./agent-run-model";

/**
 * The agent run state machine (seed 001 §2, DESIGN "Orchestration"): one aggregate per run of one
 * role on one task (optionally one DAG node). Pure and AWS-free: `transition` maps a run and a
 * trigger to a new run or throws IllegalTransitionError; the input is never changed.
 *
 * Decisions where the seed and DESIGN are silent:
 * - Every edge is one row of TRANSITIONS (single target per (state, trigger)). Triggers whose
 *   outcome depends on data are split into distinct triggers instead of branching in code:
 *   a failure is classified first (`classifyFailure`) into RetryScheduled / TaskFailed /
 *   NeedsHuman / TaskBlocked; a human resolution is HumanResolved (-> COMPLETED, the human
 *   supplied or approved the output) or HumanRetry (-> READY, run again with a fresh budget).
 * - Retries within the budget never enter FAILED: RUNNING --RetryScheduled--> READY, attempt + 1.
 *   FAILED is reached on a permanent or business failure, an exhausted budget, a dependency or
 *   confirmation timeout, or a hung lease, and only ManualReset leaves it.
 * - No TaskStarted: READY --DependenciesSatisfied--> RUNNING is the start (also for retries: the
 *   executor re-checks the dependencies and dispatches again) and starts the lease; the worker's
 *   heartbeats extend it. A hung run goes to FAILED (TaskHung is the takeover entry; a late
 *   TaskCompleted from the lost worker is then an illegal transition, which fences it out).
 * - Guards beyond the table (both raise IllegalTransitionError with `guard` set):
 *   RetryScheduled needs attempt < max_attempts; TaskHung needs the lease to be expired at `now`
 *   (a sweeper that raced with a heartbeat is refused).
 * - Heartbeat (RUNNING -> RUNNING) renews the lease (never shortens it) and is not recorded in
 *   `history`, which holds state changes only (the last HISTORY_LIMIT of them;
 *   `transition_count` counts them all).
 * - CANCELLED and DEGRADED are terminal for the DAG executor; like COMPLETED they only leave
 *   through TaskArchived (-> IDLE). Degrading replaces the failing trigger (the executor applies
 *   TaskDegraded instead of TaskFailed / DependencyTimeout / ExternalConfirmTimeout / a human
 *   give-up when the node's policy allows it); a FAILED run is not degraded afterwards.
 * - BLOCKED (unknown outcome) gets a confirmation deadline `confirm_by`; `sweepBlocked` reports
 *   overdue ones so ExternalConfirmTimeout has an emitter, as `sweepHung` does for TaskHung. For
 *   a workflow node the orchestrator keeps a BLOCKED node's deadline in the run's state and the
 *   lease sweeper reports it (`node.confirm.expired`); the agent applies the trigger.
 * - `attempt` is 1-based: the number of the current execution within the current assignment.
 *   TaskAssigned and HumanRetry set it to 1, RetryScheduled adds 1.
 * - Two ids (seed 000 §4.1): `agent_run_key` names the agent run for good (the aggregate), and
 *   `run_id` the current run, which the worker sets (`withRunId`) each time it runs or resumes the
 *   agent run; each history entry records the run it happened in.
 */

export interface NewRunInput {
  readonly agent_run_key: string;
  /** The run that starts it, when the worker runs it at once. */
  readonly run_id?: string;
  readonly task_id: string;
  readonly tenant_id?: string;
  readonly role: string;
  readonly node_id?: string;
  readonly max_attempts?: number;
  readonly lease_seconds?: number;
  readonly now: Date;
}

/** A new run in IDLE (assign it with TaskAssigned). */
export function newRun(input: NewRunInput): AgentRun {
  const at = input.now.toISOString();
  return parseRun(
    compact({
      agent_run_key: input.agent_run_key,
      run_id: input.run_id,
      task_id: input.task_id,
      tenant_id: input.tenant_id,
      role: input.role,
      node_id: input.node_id,
      state: "IDLE",
      attempt: 1,
      max_attempts: input.max_attempts ?? DEFAULT_MAX_ATTEMPTS,
      lease_seconds: input.lease_seconds ?? DEFAULT_LEASE_SECONDS,
      history: [],
      transition_count: 0,
      created_at: at,
      updated_at: at,
    }),
  );
}

export interface TransitionOptions {
  readonly now: Date;
  /** Why; recorded in the history entry (defaults to the error code when there is one). */
  readonly reason?: string;
  /** The failure behind this trigger: an AgentBusError, any thrown value, or a RunError. */
  readonly error?: unknown;
  /** The result (TaskCompleted, HumanResolved). */
  readonly output?: unknown;
  /** Lease length on entering RUNNING or on Heartbeat (defaults to run.lease_seconds). */
  readonly leaseSeconds?: number;
  /** Confirmation deadline on entering BLOCKED (defaults to DEFAULT_CONFIRM_SECONDS). */
  readonly confirmSeconds?: number;
}

/**
 * The run id (`agrun_…`, the envelope's `run_id`) of `group`'s run on `event`, delivered for the
 * `receiveCount`th time: new for each run of an agent and each resume (a resume is a new message),
 * and the same wherever one run needs it, with nothing stored first (a hash of the three; see
 * functions/roles/content-agents/ids.ts for why it is derived, not drawn).
 */
export function agentRunIdOf(group: string, event: Envelope, receiveCount: number): string {
  return `agrun_${letterDigest(`${group}\u0000${event.event_id}\u0000${receiveCount}`, 32)}`;
}

/** The run as the worker runs (or resumes) it under `runId`: a new run of the same agent run. */
export function withRunId(run: AgentRun, runId: string): AgentRun {
  return run.run_id === runId ? run : { ...run, run_id: runId };
}

/** Triggers accepted in a state (guards aside). */
export function legalTriggers(state: RunState): RunTrigger[] {
  return TRIGGERS.filter((trigger) => TRANSITIONS[state][trigger] !== undefined);
}

/** Every state reachable from `start` through the table (including `start`). */
export function reachableStates(start: RunState = "IDLE"): Set<RunState> {
  const seen = new Set<RunState>([start]);
  const queue: RunState[] = [start];
  for (let state = queue.shift(); state !== undefined; state = queue.shift()) {
    for (const next of Object.values(TRANSITIONS[state])) {
      if (next !== undefined && !seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return seen;
}

/** RUNNING and its lease has expired at `now`. */
export function isHung(run: AgentRun, now: Date): boolean {
  return (
    run.state === "RUNNING" &&
    run.lease_expires_at !== undefined &&
    Date.parse(run.lease_expires_at) <= now.getTime()
  );
}

/** BLOCKED and its confirmation deadline has passed at `now`. */
export function isConfirmOverdue(run: AgentRun, now: Date): boolean {
  return (
    run.state === "BLOCKED" &&
    run.confirm_by !== undefined &&
    Date.parse(run.confirm_by) <= now.getTime()
  );
}

/** The runs a scheduled sweeper should report with TaskHung. */
export function sweepHung(runs: Iterable<AgentRun>, now: Date): AgentRun[] {
  return [...runs].filter((run) => isHung(run, now));
}

/** The runs a scheduled sweeper should report with ExternalConfirmTimeout. */
export function sweepBlocked(runs: Iterable<AgentRun>, now: Date): AgentRun[] {
  return [...runs].filter((run) => isConfirmOverdue(run, now));
}

export type FailureTrigger = "RetryScheduled" | "TaskFailed" | "NeedsHuman" | "TaskBlocked";

/**
 * The trigger for a failure of a RUNNING run, from the error's class (DESIGN "Error classes"):
 * - code `model.invalid_output*` (any class): RetryScheduled while attempts are left, then
 *   NeedsHuman;
 * - transient (and anything that is not an AgentBusError): RetryScheduled while attempts are
 *   left, then TaskFailed;
 * - permanent: TaskFailed at once;
 * - code `budget.exhausted` (the model budget of the run or its tenant is spent): NeedsHuman;
 * - business: TaskFailed at once (the refusal is kept in `error`, class "business");
 * - unknown_outcome: TaskBlocked, until ExternalUnblocked or ExternalConfirmTimeout.
 */
export function classifyFailure(error: unknown, run: AgentRun): FailureTrigger {
  const { code, errorClass } = toRunError(error);
  const attemptsLeft = run.attempt < run.max_attempts;
  if (isInvalidOutput(code)) return attemptsLeft ? "RetryScheduled" : "NeedsHuman";
  // The run's or its tenant's model budget is spent (./model-guard.ts): a person decides.
  if (code === BUDGET_EXHAUSTED) return "NeedsHuman";
  switch (errorClass) {
    case "transient":
      return attemptsLeft ? "RetryScheduled" : "TaskFailed";
    case "unknown_outcome":
      return "TaskBlocked";
    case "permanent":
    case "business":
      return "TaskFailed";
  }
}

/**
 * Whether `code` is the model's answer out of shape (`model.invalid_output`, or one of its
 * subcodes): what a run that gives up on ends NEEDS_HUMAN for, waiting for a person.
 */
export function isInvalidOutput(code: string): boolean {
  return code === MODEL_INVALID_OUTPUT || code.startsWith(`${MODEL_INVALID_OUTPUT}.`);
}

/** Classifies the failure and applies it: `transition(run, classifyFailure(error, run), ...)`. */
export function fail(
  run: AgentRun,
  error: unknown,
  options: Omit<TransitionOptions, "error">,
): AgentRun {
  return transition(run, classifyFailure(error, run), { ...options, error });
}

const DEFAULT_ERRORS: Partial<Record<RunTrigger, Omit<RunError, "message">>> = {
  TaskFailed: { code: "agent_run.failed", errorClass: "permanent" },
  TaskHung: { code: "agent_run.lease_expired", errorClass: "transient" },
  DependencyTimeout: { code: "agent_run.dependency_timeout", errorClass: "transient" },
  ExternalConfirmTimeout: { code: "agent_run.confirm_timeout", errorClass: "unknown_outcome" },
  NeedsHuman: { code: MODEL_INVALID_OUTPUT, errorClass: "permanent" },
};

/**
 * Applies one trigger. Returns a new run; throws IllegalTransitionError (and changes nothing)
 * when the table has no edge for (run.state, trigger) or a guard fails.
 * Lease: entering RUNNING sets `lease_expires_at = now + leaseSeconds`, Heartbeat extends it,
 * leaving RUNNING clears it.
 */
export function transition(
  run: AgentRun,
  trigger: RunTrigger,
  options: TransitionOptions,
): AgentRun {
  const from = run.state;
  const to = TRANSITIONS[from][trigger];
  if (to === undefined) throw new IllegalTransitionError(from, trigger, run.agent_run_key);
  const { now } = options;
  if (trigger === "RetryScheduled" && run.attempt >= run.max_attempts)
    throw new IllegalTransitionError(from, trigger, run.agent_run_key, "retry_budget_exhausted");
  if (trigger === "TaskHung" && !isHung(run, now))
    throw new IllegalTransitionError(from, trigger, run.agent_run_key, "lease_not_expired");

  const at = now.toISOString();
  const leaseMs = () => seconds(options.leaseSeconds ?? run.lease_seconds, "leaseSeconds") * 1000;
  const next: AgentRun = { ...run, updated_at: at };

  if (trigger === "Heartbeat") {
    const current = run.lease_expires_at ? Date.parse(run.lease_expires_at) : 0;
    next.lease_expires_at = new Date(Math.max(current, now.getTime() + leaseMs())).toISOString();
    next.last_heartbeat_at = at;
    return next;
  }

  next.state = to;

  // Lease: held exactly while RUNNING.
  if (to === "RUNNING") {
    next.lease_expires_at = new Date(now.getTime() + leaseMs()).toISOString();
    delete next.last_heartbeat_at;
  } else {
    delete next.lease_expires_at;
  }
  // Confirmation deadline: held exactly while BLOCKED.
  if (to === "BLOCKED") {
    const confirmMs =
      seconds(options.confirmSeconds ?? DEFAULT_CONFIRM_SECONDS, "confirmSeconds") * 1000;
    next.confirm_by = new Date(now.getTime() + confirmMs).toISOString();
  } else {
    delete next.confirm_by;
  }

  if (trigger === "TaskAssigned" || trigger === "HumanRetry") next.attempt = 1;
  if (trigger === "RetryScheduled") next.attempt = run.attempt + 1;

  const error = errorFor(trigger, options, run, now);
  if (error) next.error = error;
  if (to === "COMPLETED" || to === "IDLE") delete next.error;

  if (to === "COMPLETED" && options.output !== undefined) next.output = options.output;
  else if (to === "IDLE" || to === "DEGRADED") delete next.output;

  const entry = historyEntry(run, to, trigger, at, options.reason ?? error?.code);
  next.history = [...run.history, entry].slice(-HISTORY_LIMIT);
  next.transition_count = run.transition_count + 1;
  return next;
}

/** The history entry of a change of `run`, under the run it happened in. */
function historyEntry(
  run: AgentRun,
  to: RunState,
  trigger: RunTrigger,
  at: string,
  reason: string | undefined,
): HistoryEntry {
  const entry: HistoryEntry = { from: run.state, to, trigger, at };
  if (reason !== undefined) entry.reason = reason;
  if (run.run_id !== undefined) entry.run_id = run.run_id;
  return entry;
}

function errorFor(
  trigger: RunTrigger,
  options: TransitionOptions,
  run: AgentRun,
  now: Date,
): RunError | undefined {
  if (options.error !== undefined) return toRunError(options.error);
  const fallback = DEFAULT_ERRORS[trigger];
  if (!fallback) return undefined;
  const message =
    options.reason ??
    (trigger === "TaskHung"
      ? `lease expired at ${run.lease_expires_at} (now ${now.toISOString()}); last heartbeat ${run.last_heartbeat_at ?? "never"}`
      : `${trigger} in ${run.state}`);
  return { ...fallback, message };
}

function toRunError(error: unknown): RunError {
  const parsed = RunError.safeParse(error);
  if (parsed.success && !(error instanceof Error)) return parsed.data;
  const described = describe(error);
  return { ...described, message: described.message.slice(0, 4096) };
}

function seconds(value: number, name: string): number {
  if (!Number.isFinite(value) || value <= 0)
    throw new PermanentError("agent_run.invalid_option", `${name} must be a positive number`);
  return value;
}

function compact<T extends Record<string, unknown>>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
