import { WorkflowChildApprovalRequestedPayload } from "../../../schemas/events/workflow-child";
import { TenantId } from "../../../schemas/ids";
import * as z from "../../../schemas/zod";
import type { ApprovalRequest } from "../../core/approval";
import type { WorkflowDefinition } from "../../core/dag/definition";
import { DagEventTypeSchema, DagRunSchema, HeldNodeSchema } from "../../core/dag/run";
import { PermanentError } from "../../core/errors";
import type { StateSummary } from "../../core/ports";

/**
 * What the orchestrator stores per run (aggregate `dag_run/<run_id>`), as a schema: the stored
 * state is parsed on every decision, never cast.
 */

export const TIMELINE_LIMIT = 200;

/**
 * Steps of a node's agent that the orchestrator records beside the DAG's: the agent started (or
 * resumed) it, it is BLOCKED on a confirmation, the confirmation's outcome went to the agent.
 */
export const AGENT_STEP_TYPES = ["node.started", "node.blocked", "node.unblocked"] as const;
export const AgentStepTypeSchema = z.enum(AGENT_STEP_TYPES);
export type AgentStepType = z.output<typeof AgentStepTypeSchema>;

/** A BLOCKED node: what its agent asked, until when, and the outcome once one was sent. */
export const NodeBlockSchema = z.object({
  since: z.string(),
  confirm_by: z.string(),
  question: z.string(),
  /** The map item whose agent run is BLOCKED (its index), for a map node. */
  item: z.optional(z.int().check(z.nonnegative())),
  /** The outcome handed to the agent (it resumes or fails from here). */
  outcome: z.optional(z.enum(["confirmed", "refused", "timed_out"])),
});
export type NodeBlock = z.output<typeof NodeBlockSchema>;

/** One step of a run as the DAG reported it, with the event that caused it. */
export const TimelineEntrySchema = z.object({
  at: z.string(),
  event: z.union([DagEventTypeSchema, AgentStepTypeSchema]),
  node_id: z.optional(z.string()),
  generation: z.optional(z.int().check(z.nonnegative())),
  /** The signal of a `signal.unmatched` step. */
  signal: z.optional(z.string()),
  /** The event type that led to this step. */
  cause: z.string(),
});
export type TimelineEntry = z.output<typeof TimelineEntrySchema>;

/** How long a RUNNING node's current assignment may go without an outcome or a heartbeat. */
export const NodeLeaseSchema = z.object({
  generation: z.int().check(z.nonnegative()),
  /** ISO 8601. */
  expires_at: z.string(),
  /** The agent has acknowledged the assignment (its first heartbeat): the lease runs from then. */
  started: z.optional(z.boolean()),
  /** How many times the assignment was sent again after its lease ran out. */
  redeliveries: z.optional(z.int().check(z.nonnegative())),
  /** When the agent acknowledged the assignment (its `node.started`), ISO 8601. */
  started_at: z.optional(z.string()),
  /** Set while the node's agent run is BLOCKED on an external confirmation. */
  blocked: z.optional(NodeBlockSchema),
});
export type NodeLease = z.output<typeof NodeLeaseSchema>;

/** The dependency timeout of a waiting node, for the generation its wait began in. */
export const NodeWaitSchema = z.object({
  generation: z.int().check(z.nonnegative()),
  /** When the wait began (ISO 8601). */
  since: z.string(),
  /** ISO 8601. */
  due_at: z.string(),
});
export type NodeWait = z.output<typeof NodeWaitSchema>;

/**
 * The time of a RUNNING wait node's assignment (./timers): when its timer runs out, or, for a
 * wait on a signal, the signal's deadline.
 */
export const NodeTimerSchema = z.object({
  generation: z.int().check(z.nonnegative()),
  /** ISO 8601. */
  due_at: z.string(),
  /** The signal the node waits for (absent: a timer). */
  signal: z.optional(z.string()),
});
export type NodeTimer = z.output<typeof NodeTimerSchema>;

/**
 * A RUNNING child node whose plan names roles that write: the child run waits for a person's
 * approval until `deadline` (./plan-approval). Kept for the node's assignment (`generation`),
 * with the decision once one was taken.
 */
export const PlanApprovalSchema = z.object({
  generation: z.int().check(z.nonnegative()),
  child_run_id: z.string(),
  /** When the node began to wait (ISO 8601). */
  since: z.string(),
  /** When, with no decision, the node fails (ISO 8601). */
  deadline: z.string(),
  plan: WorkflowChildApprovalRequestedPayload.shape.plan,
  writes: WorkflowChildApprovalRequestedPayload.shape.writes,
  decision: z.optional(
    z.object({
      verdict: z.enum(["approve", "reject"]),
      by: z.string(),
      at: z.string(),
      reason: z.optional(z.string()),
    }),
  ),
});
export type PlanApproval = z.output<typeof PlanApprovalSchema>;

export const OrchestratorStateSchema = z.object({
  /** What the run's start named: a content workflow kind, or a definition's name. */
  workflow: z.string(),
  run: DagRunSchema,
  /** READY nodes a cap or the queue-depth gate held back on the last pass. */
  held: z.readonly(z.array(HeldNodeSchema)),
  /** The last TIMELINE_LIMIT steps of the run. */
  timeline: z.readonly(z.array(TimelineEntrySchema)),
  /** The lease of each RUNNING node (absent in states stored before leases: read as {}). */
  leases: z.optional(z.record(z.string(), NodeLeaseSchema)),
  /** When each node still waiting for its inputs (PENDING, or READY and held) gives up. */
  waits: z.optional(z.record(z.string(), NodeWaitSchema)),
  /** The time of each RUNNING wait node (absent in states stored before wait nodes ran: {}). */
  timers: z.optional(z.record(z.string(), NodeTimerSchema)),
  /** Correlation and task of the start request: what the sweeper's reports about the run carry. */
  origin: z.optional(z.object({ correlation_id: z.string(), task_id: z.string() })),
  /** The tenant whose run it is: its start request's (absent: the default tenant). */
  tenant_id: z.optional(TenantId),
  /**
   * Where the run's definition was registered (functions/core/dag/registry.ts): a tenant, or `*`
   * for every tenant. Absent: one of the stack's workflows.
   */
  definition_scope: z.optional(z.string()),
  /** The run whose child node started this run (./children), absent for a run started otherwise. */
  parent: z.optional(
    z.object({
      run_id: z.string(),
      node_id: z.string(),
      /** The generation of the node's assignment this run is the child of. */
      generation: z.int().check(z.nonnegative()),
    }),
  ),
  /** The approval the plan of each RUNNING child node waits for, when it names roles that write. */
  plan_approvals: z.optional(z.record(z.string(), PlanApprovalSchema)),
  /** The definition a run of a plan runs (an upstream's output, checked at its start): the run
   * pins the plan itself, which no registry holds. */
  plan: z.optional(z.unknown()),
});
export type OrchestratorState = z.output<typeof OrchestratorStateSchema>;

/** The stored state of a run; null (a refused start leaves no run) and undefined read as none. */
export function parseRunState(stored: unknown): OrchestratorState | undefined {
  if (stored === null || stored === undefined) return undefined;
  return parseWith(
    OrchestratorStateSchema,
    stored,
    "orchestrator.invalid_state",
    "stored run state",
  );
}

/** `value` parsed by `schema`, or a PermanentError with `code` naming what was wrong. */
export function parseWith<S extends z.ZodMiniType>(
  schema: S,
  value: unknown,
  code: string,
  what: string,
): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new PermanentError(code, `${what} is invalid: ${z.prettifyError(parsed.error)}`);
}

/**
 * The nodes whose agent is BLOCKED on a confirmation, as the approval primitive has them
 * (functions/core/approval.ts): approving resumes the agent with the confirmation, rejecting
 * fails the node, `confirm_by` fails it too.
 */
export function blockedApprovals(
  state: OrchestratorState,
  def?: WorkflowDefinition,
): ApprovalRequest[] {
  const { run } = state;
  return Object.entries(state.leases ?? {}).flatMap(([id, lease]) => {
    const node = run.nodes[id];
    const { blocked } = lease;
    if (!blocked || blocked.outcome || node?.state !== "RUNNING") return [];
    if (lease.generation !== node.assigned_generation) return [];
    const role = def?.nodes.find((n) => n.id === id)?.role ?? id;
    return [
      {
        step: id,
        action: `resume ${role}`,
        input: {
          question: blocked.question,
          ...(blocked.item === undefined ? {} : { item: blocked.item }),
        },
        since: blocked.since,
        deadline: blocked.confirm_by,
        onDeadline: "fail" as const,
      },
    ];
  });
}

/** The approval of a child node's plan that waits for a person: its node's assignment's, undecided. */
export function pendingPlanApproval(
  state: OrchestratorState,
  nodeId: string,
): PlanApproval | undefined {
  const approval = currentPlanApproval(state, nodeId);
  return approval?.decision === undefined ? approval : undefined;
}

/** The approval of a child node's plan kept for the node's current assignment, in a RUNNING run. */
export function currentPlanApproval(
  state: OrchestratorState,
  nodeId: string,
): PlanApproval | undefined {
  const approval = state.plan_approvals?.[nodeId];
  const node = state.run.nodes[nodeId];
  if (!approval || state.run.status !== "RUNNING" || node?.state !== "RUNNING") return undefined;
  return node.assigned_generation === approval.generation ? approval : undefined;
}

/**
 * Since when node `nodeId` has waited for a person in its current assignment, answered or not: its
 * plan's approval, else its agent's confirmation (undefined: it waits for neither). A node waits
 * more than once (a map's items, a plan proposed again after a re-run); this tells the waits apart.
 */
export function personWaitSince(state: OrchestratorState, nodeId: string): string | undefined {
  const plan = currentPlanApproval(state, nodeId);
  if (plan) return plan.since;
  const node = state.run.nodes[nodeId];
  if (state.run.status !== "RUNNING" || node?.state !== "RUNNING") return undefined;
  const lease = state.leases?.[nodeId];
  return lease && lease.generation === node.assigned_generation ? lease.blocked?.since : undefined;
}

/** The plans' approvals kept in `state`: those of nodes still RUNNING in the same assignment. */
export function planApprovalsAfter(state: OrchestratorState): OrchestratorState["plan_approvals"] {
  const kept = Object.keys(state.plan_approvals ?? {}).flatMap((nodeId) => {
    const approval = currentPlanApproval(state, nodeId);
    return approval ? [[nodeId, approval] as const] : [];
  });
  return kept.length > 0 ? Object.fromEntries(kept) : undefined;
}

/**
 * The child nodes whose plan waits for a person's approval, as the approval primitive has them
 * (functions/core/approval.ts): approving starts the child run, rejecting fails the node, and so
 * does the deadline. What a person is shown: the plan's nodes and the roles of it that write.
 */
export function planApprovals(state: OrchestratorState): ApprovalRequest[] {
  return Object.keys(state.plan_approvals ?? {}).flatMap((nodeId) => {
    const approval = pendingPlanApproval(state, nodeId);
    if (!approval) return [];
    const { plan, writes } = approval;
    return [
      {
        step: nodeId,
        action: `run plan ${plan.name} v${plan.version}`,
        input: { child_run_id: approval.child_run_id, plan, writes },
        since: approval.since,
        deadline: approval.deadline,
        onDeadline: "fail" as const,
      },
    ];
  });
}

/**
 * A workflow run; FAILED and PARTIAL runs wait for a person (re-run, reset or accept), and so does
 * a run with a node whose agent is BLOCKED on a confirmation (an approval: confirm or refuse), or
 * whose plan waits for an approval.
 */
export function summarizeRun(state: OrchestratorState): StateSummary {
  const { run } = state;
  const failed = Object.values(run.nodes).filter((n) => n.state === "FAILED").length;
  const blocked = blockedApprovals(state).length > 0 || planApprovals(state).length > 0;
  const waiting =
    run.status === "FAILED" || run.status === "PARTIAL"
      ? "failed_run"
      : blocked
        ? "approval"
        : undefined;
  return {
    kind: "run",
    status: run.status,
    label: `${run.workflow.name} v${run.workflow.version}`,
    ...(waiting ? { waiting } : {}),
    counts: { failed_nodes: failed, nodes: Object.keys(run.nodes).length },
    ...(state.tenant_id === undefined ? {} : { tenant: state.tenant_id }),
  };
}
