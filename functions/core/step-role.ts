import { type AggregateRef, type Envelope, letterDigest } from "../../schemas";
import type {
  NodeBlocked,
  NodeConfirmRequested,
  NodeStarted,
} from "../../schemas/events/agent-run";
import type { LoopRef, MapItemRef } from "../../schemas/events/fields";
import {
  STEP_COMPLETED,
  STEP_FAILED,
  type StepCommandTypes,
  type StepCompleted,
  type StepFailed,
  type StepRequested,
} from "../../schemas/events/step";
import type { NodeFailure, NodeHeartbeat } from "../../schemas/events/workflow";
import { MAX_HEARTBEAT_LEASE_SECONDS } from "../../schemas/events/workflow";
import type { NodeCancelRequested } from "../../schemas/events/workflow-cancel";
import * as z from "../../schemas/zod";
import {
  type CancelledAssignment,
  type CommandStream,
  cancelIssued,
  discardCancelled,
} from "./cancel-look-ahead";
import type { HeartbeatSpec } from "./emit";
import { describe, type ErrorInfo, PermanentError, UnknownOutcomeError } from "./errors";
import type { StateSummary } from "./ports";
import type { DecideContext, Decision, Role } from "./role";
import { type StepDeclaration, stepTypesOf } from "./steps";
import { DAG_RUN_AGGREGATE } from "./sweeper";

/**
 * A role that carries out workflow steps with a plain function: the kit's `steps.run`
 * (functions/core/role-module.ts). The handler gets the step's input, parsed by the declared
 * input schema, and returns its output (or throws); the role turns that into the answer, exactly
 * once per assignment:
 *
 * - each assignment (run, node, generation; and the item, for an item of a map node) has a step
 *   run, aggregate `step_run/<key>`, stored when it ends; a request for an assignment already
 *   answered (the orchestrator sends it again when a lease ran out with the outcome unknown)
 *   answers the same again without running the step, and a redelivered message is a duplicate in
 *   the group's inbox, as for any consumer;
 * - an item of a map node: the handler gets the item (index, count, value) in its context, beside
 *   the same input as any assignment, and the answer names the item;
 * - inside a loop's body from its second round on, the handler gets the loop in its context
 *   (`loop`: exit, round, and the body's outputs of the round before); each round is a new
 *   generation, so a new assignment with a step run of its own;
 * - input that does not fit the input schema: `step.failed`, `step.invalid_input` (permanent);
 * - output that does not fit the output schema (a model's output is untrusted input):
 *   `step.failed`, `step.invalid_output` (permanent);
 * - a thrown business, permanent or unknown-outcome error: `step.failed` with its code and class;
 *   a transient one is retried (the queue hands the request out again) until `maxAttempts`
 *   deliveries, then `step.failed` with its code;
 * - a cancelled assignment is not run: a request whose cancel is already committed behind it on
 *   the run's stream (its node re-run, its map item or first-wins branch dropped, its run
 *   cancelled) is discarded `cancelled` before the handler runs (the look-ahead,
 *   ./cancel-look-ahead.ts, given `commandStream`); a cancel received before the request ran
 *   stores the step run CANCELLED, so the request, if it comes again, is discarded too.
 * While the handler works, the consumer publishes `node.started`, then `node.heartbeat`s that
 * extend the node's lease (the group's `needs.heartbeat` is "events").
 *
 * A step that waits for outside work it started (a role that declares `waits`; `a2aStep`'s remote
 * task still working): the handler throws StepWaiting with the work's next poll. The step run is
 * stored BLOCKED (no answer) and `node.blocked` tells the orchestrator, `confirm_by` the poll's
 * time: the node's lease runs to it (plus the role's lease), and when it passes the sweeper's
 * `node.confirm.expired` makes the orchestrator send the role its confirmation
 * (`<stem>.node.confirm.requested`, `timed_out`), with the assignment's input again. The role
 * runs the handler again on it, which polls the work (never starts it again: the ledger's record
 * keeps its id) and completes, fails, or waits again. A person may answer the BLOCKED node
 * (`agentbus workflow confirm`): confirmed polls now, refused fails the node
 * (`step.wait_refused`). A request again for a BLOCKED assignment polls too; a cancel ends it.
 */

export const STEP_RUN_AGGREGATE = "step_run";
/** Deliveries of one request before a transient failure ends the step. */
export const DEFAULT_STEP_ATTEMPTS = 3;
/** The lease a step's heartbeats ask for when its declaration names none, in seconds. */
export const DEFAULT_STEP_HEARTBEAT_LEASE_SECONDS = 300;

/** What a step's handler is told besides its input. */
export interface StepContext {
  readonly runId: string;
  readonly nodeId: string;
  readonly generation: number;
  /** How many times the node was assigned over all generations. */
  readonly attempt: number;
  readonly role: string;
  readonly taskId: string;
  readonly tenantId?: string;
  readonly now: Date;
  /** How many times this request was handed out (1 on first delivery). */
  readonly receiveCount: number;
  /** The role takes confirmations (it declares `waits`): the handler may throw StepWaiting. */
  readonly mayWait?: boolean;
  /** For an item of a map node: which item, of how many, and its value from the list. */
  readonly item?: MapItemRef;
  /**
   * Inside a loop's body from its second round on: the loop (its last node, `exit`), the round,
   * and the body's outputs of the round before by node id (`previous`).
   */
  readonly loop?: LoopRef;
}

/**
 * Thrown by a step's handler (of a role that declares `waits`) when the outside work it started
 * still goes on: the node is BLOCKED until `pollAt`, then the handler is run again to poll it
 * (see the module comment). An UnknownOutcomeError: to a role that cannot wait, the outcome is
 * unknown.
 */
export class StepWaiting extends UnknownOutcomeError {
  readonly pollAt: Date;
  constructor(code: string, reason: string, pollAt: Date, details?: Record<string, unknown>) {
    super(code, reason, details ? { details } : undefined);
    this.pollAt = pollAt;
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the input and output its declaration's schemas give
export type StepHandler = (input: any, context: StepContext) => unknown | Promise<unknown>;

/** The record of one assignment once it ended. */
export interface StepRun {
  readonly kind: "step_run";
  readonly role: string;
  readonly run_id: string;
  readonly node_id: string;
  readonly generation: number;
  /** The map item (its index), for an item of a map node. */
  readonly item?: number;
  readonly status: "COMPLETED" | "FAILED" | "CANCELLED" | "BLOCKED";
  readonly tenant_id?: string;
  /** While BLOCKED on outside work: since when, its next poll, and what it waits for. */
  readonly waiting?: { readonly since: string; readonly poll_at: string; readonly reason: string };
  /** The answer it gave (sent again for a repeated request). */
  readonly answer?: { readonly type: string; readonly payload: StepCompleted | StepFailed };
}

/**
 * The key of one assignment's record: `<prefix>_` + 32 letters of a SHA-256 of its run, node and
 * generation, and of its item's index for an item of a map node. A step role's records are
 * `srun_`; a role that takes its commands itself names its own (`arun_` for agent runs).
 */
export function assignmentKey(
  prefix: string,
  runId: string,
  nodeId: string,
  generation: number,
  item?: number,
): string {
  const itemPart = item === undefined ? "" : `\u0000${item}`;
  return `${prefix}_${letterDigest(`${runId}\u0000${nodeId}\u0000${generation}${itemPart}`, 32)}`;
}

/** The step run key of one assignment (`srun_`, ./assignmentKey). */
export function stepRunKey(
  runId: string,
  nodeId: string,
  generation: number,
  item?: number,
): string {
  return assignmentKey("srun", runId, nodeId, generation, item);
}

export interface StepRoleOptions {
  readonly group: string;
  readonly steps: StepDeclaration;
  readonly handler: StepHandler;
  /** @default DEFAULT_STEP_ATTEMPTS */
  readonly maxAttempts?: number;
  /**
   * The run's stream, to find a cancel committed behind a request before it runs (the role
   * module's `store`). @default none: only cancels already received count
   */
  readonly commandStream?: CommandStream;
}

/** The state of the assignment a step command is about (its run, node, generation and item). */
export function stepRunOf(event: Envelope): AggregateRef {
  const command = event.payload as StepRequested | NodeCancelRequested;
  const { run_id, node_id, generation } = command;
  return {
    type: STEP_RUN_AGGREGATE,
    id: stepRunKey(run_id, node_id, generation, itemIndexOf(command)),
  };
}

/** The assignment a request is for, as its cancel names it. */
function assignmentOf(event: Envelope): CancelledAssignment {
  const request = event.payload as StepRequested;
  const item = itemIndexOf(request);
  return {
    node_id: request.node_id,
    generation: request.generation,
    ...(item === undefined ? {} : { item }),
  };
}

/** The map item a step command names: a request carries the item, a cancel its index. */
function itemIndexOf(command: StepRequested | NodeCancelRequested): number | undefined {
  const { item } = command;
  return typeof item === "object" ? item.index : item;
}

/**
 * Where a role that also carries out steps keeps the state of `event`: a step command's
 * assignment, every other event where the role's own `stateOf` says (its aggregate without one).
 * One function for the role's descriptor and its built role, so the operator's rebuild and trace
 * find the states the consumer writes.
 */
export function stateOfWithSteps(
  stepTypes: readonly string[],
  own: ((event: Envelope) => AggregateRef) | undefined,
): (event: Envelope) => AggregateRef {
  const steps = new Set(stepTypes);
  return (event) =>
    steps.has(event.event_type) ? stepRunOf(event) : (own?.(event) ?? event.aggregate);
}

/**
 * Whether an event is an assignment's first request (`requested`, not sent again): it begins an
 * agent run of its own, with nothing before it in the run's stream (Role.beginsState).
 */
export function firstRequestOf(requested: string): (event: Envelope) => boolean {
  return (event) =>
    event.event_type === requested &&
    (event.payload as { redelivered?: true } | undefined)?.redelivered !== true;
}

/** A role that carries out `group`'s steps with `handler` (see the module comment). */
export function stepRole(options: StepRoleOptions): Role<StepRun> {
  const { group, steps } = options;
  const types = stepTypesOf(group, steps);
  const assigns = (event: Envelope) =>
    event.event_type === types.requested || event.event_type === types.confirm;
  return {
    group,
    subscriptions: [types.requested, types.cancel, ...(types.confirm ? [types.confirm] : [])],
    emits: stepRoleEmits(types),
    stateOf: stepRunOf,
    // Each request on a run's stream starts a step run of its own, unless it is sent again.
    beginsState: firstRequestOf(types.requested),
    compactState: true,
    tenantOfState: (state) => state.tenant_id,
    summarize: summarizeStepRun,
    discard: (state, event) =>
      event.event_type === types.requested
        ? discardCancelled(state?.status, () =>
            cancelIssued(options.commandStream, types.cancel, event, assignmentOf(event)),
          )
        : undefined,
    heartbeat: (event, receiveCount) =>
      assigns(event)
        ? heartbeatOf(group, steps, event, receiveCount, event.event_type === types.confirm)
        : undefined,
    decide: (state, event, context) => {
      if (event.event_type === types.cancel) return cancelled(group, state, event);
      if (event.event_type === types.confirm) return pollDue(options, state, event, context);
      return decideRequest(options, state, event, context);
    },
    failed: (_state, event, info) =>
      assigns(event)
        ? failure(group, event.payload as StepRequested, event, nodeFailure(info))
        : undefined,
  };
}

/** What a step role emits: its answers, and `node.blocked` when its steps may wait. */
export function stepRoleEmits(types: Pick<StepCommandTypes, "confirm">): string[] {
  return types.confirm
    ? [STEP_COMPLETED, STEP_FAILED, NODE_BLOCKED]
    : [STEP_COMPLETED, STEP_FAILED];
}

const NODE_BLOCKED = "node.blocked";

/**
 * The confirmation of a BLOCKED step: the poll of its work is due (`timed_out`) or a person asked
 * for it now (`confirmed`): the handler runs again; refused: the node fails. For a step run not
 * BLOCKED (answered, cancelled, or a repeat) it changes nothing.
 */
async function pollDue(
  options: StepRoleOptions,
  state: StepRun | undefined,
  event: Envelope,
  context: DecideContext<StepRun>,
): Promise<Decision<StepRun>> {
  if (state?.status !== "BLOCKED") return {};
  const confirm = event.payload as NodeConfirmRequested;
  if (confirm.outcome !== "refused") return decideRequest(options, state, event, context);
  const by = confirm.requested_by ? ` by ${confirm.requested_by}` : "";
  return failure(options.group, confirm as StepRequested, event, {
    code: "step.wait_refused",
    errorClass: "business",
    message: `the wait was refused${by}: ${confirm.note ?? state.waiting?.reason ?? ""}`.slice(
      0,
      4096,
    ),
  });
}

/** The step run BLOCKED on its outside work, and `node.blocked` until its next poll. */
function blocked(
  group: string,
  state: StepRun | undefined,
  request: StepRequested,
  event: Envelope,
  { now, wait }: { readonly now: Date; readonly wait: StepWaiting },
): Decision<StepRun> {
  const item = request.item?.index;
  const reason = wait.message.slice(0, 2000) || "outside work";
  const payload: NodeBlocked = {
    run_id: request.run_id,
    node_id: request.node_id,
    generation: request.generation,
    agent: group,
    question: reason,
    confirm_by: wait.pollAt.toISOString(),
    ...(item === undefined ? {} : { item }),
  };
  const since = state?.waiting?.since ?? now.toISOString();
  return {
    state: {
      ...stepRunRecord(group, request, item, event, "BLOCKED"),
      waiting: { since, poll_at: payload.confirm_by, reason },
    },
    emit: [{ type: NODE_BLOCKED, payload, orderKey: request.run_id }],
  };
}

/** A request: the recorded answer again, or the step run and its answer checked. */
async function decideRequest(
  { group, steps, handler, maxAttempts = DEFAULT_STEP_ATTEMPTS }: StepRoleOptions,
  state: StepRun | undefined,
  event: Envelope,
  context: DecideContext<StepRun>,
): Promise<Decision<StepRun>> {
  const request = event.payload as StepRequested;
  if (state?.answer) return { emit: [{ ...state.answer, orderKey: request.run_id }] };
  const input = steps.input.safeParse({ ...request.run_input, ...request.input });
  if (!input.success)
    return failure(
      group,
      request,
      event,
      invalid("step.invalid_input", group, "input", input.error),
    );
  let output: unknown;
  const mayWait = stepTypesOf(group, steps).confirm !== undefined;
  try {
    output = await handler(input.data, contextOf(group, request, event, context, mayWait));
  } catch (error) {
    if (error instanceof StepWaiting && mayWait)
      return blocked(group, state, request, event, { now: context.now, wait: error });
    const info = describe(error);
    if (info.errorClass === "transient" && context.receiveCount < maxAttempts) throw error;
    return failure(group, request, event, nodeFailure(info));
  }
  const checked = steps.output.safeParse(output);
  if (!checked.success)
    return failure(
      group,
      request,
      event,
      invalid("step.invalid_output", group, "output", checked.error),
    );
  const payload: StepCompleted = { ...refOf(request), role: group, output: checked.data };
  return answer(group, request, event, STEP_COMPLETED, payload);
}

/** The answer to a request, recorded with the step run so that a repeated request gets it again. */
function answer(
  group: string,
  request: StepRequested,
  event: Envelope,
  type: string,
  payload: StepCompleted | StepFailed,
): Decision<StepRun> {
  return {
    state: {
      ...stepRunRecord(
        group,
        request,
        request.item?.index,
        event,
        type === STEP_COMPLETED ? "COMPLETED" : "FAILED",
      ),
      answer: { type, payload },
    },
    emit: [{ type, payload, orderKey: request.run_id }],
  };
}

function failure(group: string, request: StepRequested, event: Envelope, error: NodeFailure) {
  return answer(group, request, event, STEP_FAILED, { ...refOf(request), role: group, error });
}

const refOf = ({ run_id, node_id, generation, attempt, item }: StepRequested) => ({
  run_id,
  node_id,
  generation,
  attempt,
  ...(item === undefined ? {} : { item: item.index }),
});

function nodeFailure(info: ErrorInfo): NodeFailure {
  return {
    code: info.code.slice(0, 256),
    errorClass: info.errorClass,
    message: info.message.slice(0, 4096),
  };
}

function invalid(
  code: string,
  group: string,
  what: "input" | "output",
  error: z.core.$ZodError,
): NodeFailure {
  const issues = z.issueLines(error, `(${what})`).join("; ");
  return nodeFailure({
    code,
    errorClass: "permanent",
    message: `the ${what} of a ${group} step does not fit its schema: ${issues}`,
  });
}

function contextOf(
  group: string,
  request: StepRequested,
  event: Envelope,
  { now, receiveCount }: DecideContext<StepRun>,
  mayWait: boolean,
): StepContext {
  return {
    runId: request.run_id,
    nodeId: request.node_id,
    generation: request.generation,
    attempt: request.attempt,
    role: group,
    taskId: event.task_id,
    ...(event.tenant_id === undefined ? {} : { tenantId: event.tenant_id }),
    now,
    receiveCount,
    ...(mayWait ? { mayWait } : {}),
    ...(request.item === undefined ? {} : { item: request.item }),
    ...(request.loop === undefined ? {} : { loop: request.loop }),
  };
}

/** A cancel: an assignment not yet answered (or BLOCKED) is closed, so its request is discarded. */
function cancelled(group: string, state: StepRun | undefined, event: Envelope): Decision<StepRun> {
  if (state && state.status !== "BLOCKED") return {};
  const cancel = event.payload as NodeCancelRequested;
  return { state: stepRunRecord(group, cancel, cancel.item, event, "CANCELLED") };
}

/** The record of an assignment of the run's node (a map node's item), as it ends or waits. */
function stepRunRecord(
  group: string,
  { run_id, node_id, generation }: Pick<StepRequested, "run_id" | "node_id" | "generation">,
  item: number | undefined,
  event: Envelope,
  status: StepRun["status"],
): StepRun {
  return {
    kind: "step_run",
    role: group,
    run_id,
    node_id,
    generation,
    ...(item === undefined ? {} : { item }),
    status,
    ...(event.tenant_id === undefined ? {} : { tenant_id: event.tenant_id }),
  };
}

/**
 * `node.started` when the step starts (`resumed` on a BLOCKED step's confirmation), then
 * `node.heartbeat`s, each extending the node's lease.
 */
function heartbeatOf(
  group: string,
  steps: StepDeclaration,
  event: Envelope,
  receiveCount: number,
  resumed: boolean,
): HeartbeatSpec {
  const { run_id, node_id, generation, attempt } = event.payload as StepRequested;
  const lease_seconds = Math.min(
    MAX_HEARTBEAT_LEASE_SECONDS,
    steps.leaseSeconds ?? DEFAULT_STEP_HEARTBEAT_LEASE_SECONDS,
  );
  const runId = `strun_${letterDigest(`${group}\u0000${event.event_id}\u0000${receiveCount}`, 32)}`;
  const assignment = { run_id, node_id, generation, attempt };
  return nodeHeartbeat(assignment, group, lease_seconds, runId, resumed || undefined);
}

/**
 * What the agent of a node reports while it works on an assignment: `node.started` first (with
 * `resumed` when it takes the assignment up again after a confirmation), then `node.heartbeat`s,
 * each extending the node's lease by `leaseSeconds`, on the run's stream, all under the agent
 * run `runId` that also answers.
 */
export function nodeHeartbeat(
  assignment: Pick<StepRequested, "run_id" | "node_id" | "generation" | "attempt">,
  agent: string,
  leaseSeconds: number,
  runId: string,
  resumed?: true,
): HeartbeatSpec {
  const { run_id, node_id, generation, attempt } = assignment;
  const lease_seconds = leaseSeconds;
  const beat: NodeHeartbeat = { run_id, node_id, generation, lease_seconds };
  const ack: NodeStarted = {
    run_id,
    node_id,
    generation,
    attempt,
    agent,
    lease_seconds,
    ...(resumed ? { resumed } : {}),
  };
  const aggregate = { type: DAG_RUN_AGGREGATE, id: run_id };
  return {
    type: "node.heartbeat",
    payload: beat,
    aggregate,
    orderKey: run_id,
    runId,
    // A beat renews the node's lease: the next goes once half of it has passed.
    leaseSeconds: lease_seconds,
    first: { type: "node.started", payload: ack, aggregate, orderKey: run_id, runId },
  };
}

function summarizeStepRun(run: StepRun): StateSummary {
  return {
    kind: "step_run",
    status: run.status,
    label: `${run.role} ${run.node_id}${run.item === undefined ? "" : ` item ${run.item}`} of ${run.run_id}`,
    ...(run.tenant_id === undefined ? {} : { tenant: run.tenant_id }),
  };
}

/**
 * A role that also carries out steps: events of the step role's types go to it, every other to
 * `role` (a module whose role has its own work, as the refund agent's conversations). Without
 * `role`, the step role alone.
 */
export function withSteps(
  role: Role<unknown> | undefined,
  steps: Role<StepRun>,
  stateOf = stateOfWithSteps(steps.subscriptions, role?.stateOf),
): Role<unknown> {
  if (!role) return steps as Role<unknown>;
  const mine = new Set(steps.subscriptions);
  const isStep = (event: Envelope) => mine.has(event.event_type);
  const step = steps as Role<unknown>;
  const overlap = role.subscriptions.filter((t) => mine.has(t));
  if (overlap.length > 0)
    throw new PermanentError(
      "steps.overlap",
      `role ${role.group} already takes ${overlap.join(", ")}, which its steps take`,
    );
  return {
    ...role,
    subscriptions: [...role.subscriptions, ...steps.subscriptions],
    emits: [...(role.emits ?? []), ...(steps.emits ?? [])],
    ...(role.sharedStreams ? { sharedStreams: role.sharedStreams } : {}),
    beginsState: (event) =>
      isStep(event) ? (step.beginsState?.(event) ?? false) : (role.beginsState?.(event) ?? false),
    stateOf,
    decide: (state, event, context) =>
      isStep(event) ? step.decide(state, event, context) : role.decide(state, event, context),
    discard: (state, event, now) =>
      isStep(event) ? step.discard?.(state, event, now) : role.discard?.(state, event, now),
    failed: (state, event, failure, context) =>
      isStep(event)
        ? step.failed?.(state, event, failure, context)
        : role.failed?.(state, event, failure, context),
    heartbeat: (event, receiveCount) =>
      isStep(event) ? step.heartbeat?.(event, receiveCount) : role.heartbeat?.(event, receiveCount),
    unfinished: (state, event) => !isStep(event) && (role.unfinished?.(state, event) ?? false),
    discarded: async (state, event, reason, context) =>
      isStep(event) ? undefined : role.discarded?.(state, event, reason, context),
    summarize: (state) => (isStepRun(state) ? step.summarize?.(state) : role.summarize?.(state)),
    tenantOfState: (state) =>
      isStepRun(state) ? step.tenantOfState?.(state) : role.tenantOfState?.(state),
  };
}

function isStepRun(state: unknown): state is StepRun {
  return (
    typeof state === "object" && state !== null && (state as { kind?: unknown }).kind === "step_run"
  );
}
