import type { Envelope } from "../../../schemas";
import type { StepRequested } from "../../../schemas/events/step";
import { type NodeRequested, NodeRequestedPayload } from "../../../schemas/events/workflow";
import {
  NODE_CANCEL_REASONS,
  type NodeCancelRequested,
} from "../../../schemas/events/workflow-cancel";
import type { DagCommand, DagEvent, Transition } from "../../core/dag/run";
import type { EmitOf } from "../../core/define-role";
import { PermanentError } from "../../core/errors";
import type { StepRoles } from "./catalog";
import { childCommand, endToParent, isChildCommand, parentFields } from "./child-commands";
import {
  definitionOf,
  type OrchestratorDecision,
  type OrchestratorEmit,
  type RunContext,
  type RunEnd,
  type StepCommand,
} from "./context";
import { waitsAfter } from "./deadlines";
import { dueAtOf, leasesAfter } from "./leases";
import {
  type OrchestratorState,
  parseWith,
  planApprovalsAfter,
  TIMELINE_LIMIT,
  type TimelineEntry,
} from "./state";
import { timersAfter } from "./timers";

const RUN_END_EVENTS: Readonly<Record<string, RunEnd>> = {
  "run.completed": "workflow.completed",
  "run.partial": "workflow.partial",
  "run.failed": "workflow.failed",
  "run.cancelled": "workflow.cancelled",
};
/** The facts a run ends with. */
export const RUN_ENDS: readonly RunEnd[] = Object.values(RUN_END_EVENTS);

/**
 * Turn a DAG transition into the next state and the envelopes to emit: the step role's request
 * per node the transition assigned, its cancel per assignment it cancelled (the role's command
 * channel, seed 001 §4; the types are the role's entry in the stack's step roles), a child run's
 * start or cancel (./child-commands), `workflow.completed|partial|failed|cancelled` when the
 * run ended (with `endDetails` added to its payload, and its parent for a child run, which also
 * tells its parent `workflow.child.ended`), the timeline, the leases, the dependency
 * deadlines of the nodes still waiting (./waits), the time of each wait node (./timers), the
 * approvals plans still wait for (./plan-approval) and the due time.
 * A transition that only reports ignored deliveries changes nothing and emits nothing.
 */
export function applyTransition(
  context: RunContext,
  state: OrchestratorState,
  transition: Transition,
  endDetails: Readonly<Record<string, unknown>> = {},
): OrchestratorDecision {
  const { event: cause, leasing } = context;
  const steps = transition.events.filter((e) => e.type !== "delivery.ignored");
  if (steps.length === 0 && transition.commands.length === 0 && sameHeld(state, transition))
    return {};
  const runId = transition.run.run_id;
  const emit = [
    ...transition.commands.flatMap((command): EmitOf<OrchestratorEmit>[] =>
      isChildCommand(command)
        ? [childCommand(state, command)]
        : nodeCommand(context.stepRoles, command, runId),
    ),
    ...steps.flatMap((step) => runEnd(step, runId, { ...endDetails, ...parentFields(state) })),
    ...steps.flatMap((step) => endToParent(state, step)),
  ];
  const entries = steps.map((step) => timelineEntry(step, cause, leasing.now));
  const def = definitionOf(context, state);
  const moved: OrchestratorState = {
    ...state,
    run: transition.run,
    held: transition.held,
    timeline: [...state.timeline, ...entries].slice(-TIMELINE_LIMIT),
    leases: leasesAfter(state, def, transition, leasing),
    waits: waitsAfter(state, def, transition, leasing),
    timers: timersAfter(state, transition, leasing.now),
  };
  const approvals = planApprovalsAfter(moved);
  const { plan_approvals: _before, ...rest } = moved;
  const next: OrchestratorState = approvals ? { ...rest, plan_approvals: approvals } : rest;
  return { state: next, emit, dueAt: dueAtOf(next, leasing) };
}

/**
 * The step role's command for a DAG command: its request or its cancel, naming the map item for
 * an item of a map node (the request carries its index, count and value; the cancel its index),
 * and, inside a loop's body from its second round on, the loop's round and the round before's
 * outputs. A wait node's start sends nothing: its time is kept in the state (./timers).
 * The types are the stack's (registered from its table of step roles), known at run time only.
 */
function nodeCommand(
  stepRoles: StepRoles,
  command: DagCommand,
  runId: string,
): EmitOf<StepCommand>[] {
  if (command.type === "wait.start") return [];
  if (command.type !== "node.cancel" && command.type !== "node.assign") throw unsupported(command);
  const entry = stepRoles.of(command.role);
  if (command.type === "node.cancel") {
    const reason = command.reason;
    if (!isNodeCancelReason(reason)) throw unsupported(command);
    const cancel: NodeCancelRequested = {
      run_id: command.run_id,
      node_id: command.node_id,
      generation: command.generation,
      reason,
      ...(command.item === undefined ? {} : { item: command.item }),
    };
    return [{ type: entry.cancel, payload: cancel, orderKey: runId } as EmitOf<StepCommand>];
  }
  const { item, loop } = command;
  const payload: NodeRequested & Pick<StepRequested, "item"> = {
    run_id: command.run_id,
    node_id: command.node_id,
    generation: command.generation,
    attempt: command.attempt,
    input: { ...command.input },
    run_input: parseWith(
      NodeRequestedPayload.shape.run_input,
      command.run_input,
      "workflow.invalid_run_input",
      `the input of run ${command.run_id}`,
    ),
    ...(item === undefined
      ? {}
      : { item: { index: item.index, count: item.count, value: item.value } }),
    ...(loop === undefined
      ? {}
      : { loop: { exit: loop.exit, round: loop.round, previous: { ...loop.previous } } }),
    ...(command.redelivered ? { redelivered: true as const } : {}),
  };
  return [{ type: entry.requested, payload, orderKey: runId } as EmitOf<StepCommand>];
}

const isNodeCancelReason = (reason: string): reason is NodeCancelRequested["reason"] =>
  (NODE_CANCEL_REASONS as readonly string[]).includes(reason);

/**
 * A DAG command the orchestrator has no command for (child runs are ./child-commands'): a node
 * cancel whose reason the step roles' cancel does not name.
 */
function unsupported(command: DagCommand): PermanentError {
  const what =
    command.type === "node.cancel" ? `${command.type} (${command.reason})` : command.type;
  return new PermanentError(
    "workflow.unsupported_step",
    `run ${command.run_id}: the orchestrator has no command for ${what} (node ${command.node_id})`,
    { details: { run_id: command.run_id, node_id: command.node_id, command: command.type } },
  );
}

/** `workflow.completed|partial|failed|cancelled` for the step that ended the run (else none). */
function runEnd(
  step: DagEvent,
  runId: string,
  details: Readonly<Record<string, unknown>>,
): EmitOf<RunEnd>[] {
  const type = RUN_END_EVENTS[step.type];
  if (!type || !("result" in step)) return [];
  const payload = { ...details, run_id: runId, result: step.result };
  // A cast the registry checks on emit: which end `type` is, and so what `details` must hold (a
  // cancel's requester), is known at run time only; the DAG's result is read-only.
  return [{ type, payload, orderKey: runId } as EmitOf<RunEnd>];
}

function timelineEntry(step: DagEvent, cause: Envelope, now: Date): TimelineEntry {
  return {
    at: now.toISOString(),
    event: step.type,
    ...("node_id" in step ? { node_id: step.node_id } : {}),
    ...("generation" in step ? { generation: step.generation } : {}),
    ...(step.type === "signal.unmatched" ? { signal: step.signal } : {}),
    cause: cause.event_type,
  };
}

function sameHeld(state: OrchestratorState, transition: Transition): boolean {
  return JSON.stringify(state.held) === JSON.stringify(transition.held);
}
