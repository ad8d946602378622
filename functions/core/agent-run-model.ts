import { IsoTime } from "../../schemas/envelope";
import { OpaqueId, TenantId } from "../../schemas/ids";
import * as z from "../../schemas/zod";
import { AgentBusError, type ErrorClass, PermanentError } from "./errors";

/**
 * The agent run's states, triggers and transition table, its stored shape and its errors: the data
 * of the state machine that ./agent-run.ts runs (its comment says how the table was decided).
 */

export const STATES = [
  "IDLE",
  "READY",
  "RUNNING",
  "BLOCKED",
  "COMPLETED",
  "FAILED",
  "NEEDS_HUMAN",
  "CANCELLED",
  "DEGRADED",
] as const;

export const TRIGGERS = [
  "TaskAssigned",
  "DependenciesSatisfied",
  "DependencyTimeout",
  "TaskCompleted",
  "TaskFailed",
  "TaskBlocked",
  "ExternalUnblocked",
  "ExternalConfirmTimeout",
  "TaskHung",
  "Heartbeat",
  "RetryScheduled",
  "NeedsHuman",
  "HumanResolved",
  "HumanRetry",
  "ManualReset",
  "TaskArchived",
  "TaskCancelled",
  "TaskDegraded",
] as const;

export const RunState = z.enum(STATES);
export type RunState = z.infer<typeof RunState>;
export const RunTrigger = z.enum(TRIGGERS);
export type RunTrigger = z.infer<typeof RunTrigger>;

/** The whole state machine. Anything not listed is illegal. */
export const TRANSITIONS: Readonly<
  Record<RunState, Readonly<Partial<Record<RunTrigger, RunState>>>>
> = {
  IDLE: { TaskAssigned: "READY", TaskCancelled: "CANCELLED" },
  READY: {
    DependenciesSatisfied: "RUNNING",
    DependencyTimeout: "FAILED",
    TaskCancelled: "CANCELLED",
    TaskDegraded: "DEGRADED",
  },
  RUNNING: {
    TaskCompleted: "COMPLETED",
    TaskFailed: "FAILED",
    TaskBlocked: "BLOCKED",
    TaskHung: "FAILED",
    Heartbeat: "RUNNING",
    RetryScheduled: "READY",
    NeedsHuman: "NEEDS_HUMAN",
    TaskCancelled: "CANCELLED",
    TaskDegraded: "DEGRADED",
  },
  BLOCKED: {
    ExternalUnblocked: "RUNNING",
    ExternalConfirmTimeout: "FAILED",
    TaskCancelled: "CANCELLED",
    TaskDegraded: "DEGRADED",
  },
  COMPLETED: { TaskArchived: "IDLE" },
  FAILED: { ManualReset: "IDLE" },
  NEEDS_HUMAN: {
    HumanResolved: "COMPLETED",
    HumanRetry: "READY",
    TaskCancelled: "CANCELLED",
    TaskDegraded: "DEGRADED",
  },
  CANCELLED: { TaskArchived: "IDLE" },
  DEGRADED: { TaskArchived: "IDLE" },
};

/** States in which the run's work is over (the DAG executor's node outcomes). */
export const TERMINAL_STATES: readonly RunState[] = [
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "DEGRADED",
];

export const HISTORY_LIMIT = 50;
export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_LEASE_SECONDS = 300;
export const DEFAULT_CONFIRM_SECONDS = 900;
/** Code prefix of "the model answered, but not in the required shape". */
export const MODEL_INVALID_OUTPUT = "model.invalid_output";
/** A run's or its tenant's model budget is spent (./model-guard.ts): no model call starts. */
export const BUDGET_EXHAUSTED = "budget.exhausted";

const ERROR_CLASSES = [
  "transient",
  "permanent",
  "business",
  "unknown_outcome",
] as const satisfies readonly ErrorClass[];

const Name = z.string().check(z.minLength(1), z.maxLength(128));

export const RunError = z.object({
  code: z.string().check(z.minLength(1), z.maxLength(256)),
  errorClass: z.enum(ERROR_CLASSES),
  message: z.string().check(z.maxLength(4096)),
});
export type RunError = z.infer<typeof RunError>;

export const HistoryEntry = z.object({
  from: RunState,
  to: RunState,
  trigger: RunTrigger,
  at: IsoTime,
  reason: z.optional(z.string().check(z.maxLength(1024))),
  /** The run (`AgentRun.run_id`) the change happened in; absent before the run had one. */
  run_id: z.optional(OpaqueId),
});
export type HistoryEntry = z.infer<typeof HistoryEntry>;

export const AgentRunSchema = z
  .object({
    /**
     * The stable key of the agent run: the same for every run of one assignment (in a workflow
     * one DAG node at one generation), through retries, redeliveries and resumes; the
     * `agent_run` aggregate id, which the DAG and the dedup of the agent's group rely on.
     */
    agent_run_key: OpaqueId,
    /**
     * The current run (seed 000 §4.1 `run_id`): new for each run and each resume, and carried by
     * what the run emits; absent while the agent never ran it (an assignment cancelled first).
     */
    run_id: z.optional(OpaqueId),
    task_id: OpaqueId,
    /** The tenant whose run it is: the assignment's (absent: the default tenant). */
    tenant_id: z.optional(TenantId),
    role: Name,
    node_id: z.optional(Name),
    state: RunState,
    attempt: z.int().check(z.minimum(1)),
    max_attempts: z.int().check(z.minimum(1)),
    /** Seconds a lease lasts when none is given to the transition. */
    lease_seconds: z.int().check(z.positive()),
    /** Set while RUNNING only. */
    lease_expires_at: z.optional(IsoTime),
    last_heartbeat_at: z.optional(IsoTime),
    /** Set while BLOCKED only: when ExternalConfirmTimeout becomes due. */
    confirm_by: z.optional(IsoTime),
    history: z.array(HistoryEntry).check(z.maxLength(HISTORY_LIMIT)),
    /** State changes ever recorded (history keeps the last HISTORY_LIMIT). */
    transition_count: z.int().check(z.minimum(0)),
    output: z.optional(z.unknown()),
    error: z.optional(RunError),
    created_at: IsoTime,
    updated_at: IsoTime,
  })
  .check(
    z.superRefine((run, ctx) => {
      if (run.attempt > run.max_attempts)
        ctx.addIssue({
          code: "custom",
          path: ["attempt"],
          message: "attempt exceeds max_attempts",
        });
      if ((run.state === "RUNNING") !== (run.lease_expires_at !== undefined))
        ctx.addIssue({
          code: "custom",
          path: ["lease_expires_at"],
          message: "a lease is held exactly while RUNNING",
        });
      if (run.confirm_by !== undefined && run.state !== "BLOCKED")
        ctx.addIssue({ code: "custom", path: ["confirm_by"], message: "set only while BLOCKED" });
      if (run.transition_count < run.history.length)
        ctx.addIssue({
          code: "custom",
          path: ["transition_count"],
          message: "fewer transitions than history entries",
        });
      const last = run.history.at(-1);
      if (last && last.to !== run.state)
        ctx.addIssue({
          code: "custom",
          path: ["history"],
          message: `last history entry ends in ${last.to}, run is ${run.state}`,
        });
    }),
  );
export type AgentRun = z.infer<typeof AgentRunSchema>;

/**
 * An agent run as stored, in today's shape. Runs stored before `agent_run_key` existed have their
 * key in `run_id` (it was reused by every run then): the key is taken from there, and `run_id`
 * stays, as the id those runs were recorded under.
 */
export function upcastRun(stored: AgentRun): AgentRun;
export function upcastRun(stored: AgentRun | undefined): AgentRun | undefined;
export function upcastRun(stored: AgentRun | undefined): AgentRun | undefined {
  if (!stored || stored.agent_run_key !== undefined || stored.run_id === undefined) return stored;
  return { ...stored, agent_run_key: stored.run_id };
}

export type GuardName = "retry_budget_exhausted" | "lease_not_expired";

/** A trigger the run's state does not accept (or whose guard fails). The run is unchanged. */
export class IllegalTransitionError extends AgentBusError {
  readonly from: RunState;
  readonly trigger: RunTrigger;
  readonly guard: GuardName | undefined;

  constructor(from: RunState, trigger: RunTrigger, runId: string, guard?: GuardName) {
    super(
      "permanent",
      "agent_run.illegal_transition",
      guard
        ? `run ${runId}: ${trigger} refused in ${from} (${guard})`
        : `run ${runId}: state ${from} does not accept ${trigger}`,
      { details: { from, trigger, runId, ...(guard ? { guard } : {}) } },
    );
    this.from = from;
    this.trigger = trigger;
    this.guard = guard;
  }
}

/** Validates a run loaded from storage; PermanentError `agent_run.invalid` when it is not one. */
export function parseRun(raw: unknown): AgentRun {
  const result = AgentRunSchema.safeParse(raw);
  if (!result.success)
    throw new PermanentError("agent_run.invalid", z.prettifyError(result.error), {
      details: { issues: result.error.issues },
    });
  return result.data;
}
