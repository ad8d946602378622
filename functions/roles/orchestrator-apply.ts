import type { Envelope } from "../../schemas";
import { type NodeRequested, NodeRequestedPayload } from "../../schemas/events/workflow";
import type { DagCommand, DagEvent, Transition } from "../core/dag/run";
import type { EmitSpec } from "../core/emit";
import type { Decision } from "../core/pipeline";
import { agentOf } from "./content-workflows";
import { dueAtOf, type Leasing, leasesAfter } from "./orchestrator-leases";
import {
  definitionOf,
  type OrchestratorState,
  parseWith,
  TIMELINE_LIMIT,
  type TimelineEntry,
} from "./orchestrator-state";

const RUN_END_EVENTS: Readonly<Record<string, string>> = {
  "run.completed": "workflow.completed",
  "run.partial": "workflow.partial",
  "run.failed": "workflow.failed",
};

/**
 * Turn a DAG transition into the next state and the envelopes to emit: a `<role>.requested` per
 * node the transition assigned, `workflow.completed|partial|failed` when the run ended, the
 * timeline, the leases and the due time. A transition that only reports ignored deliveries
 * changes nothing and emits nothing.
 */
export function applyTransition(
  state: OrchestratorState,
  transition: Transition,
  cause: Envelope,
  leasing: Leasing,
): Decision<OrchestratorState> {
  const steps = transition.events.filter((e) => e.type !== "delivery.ignored");
  if (steps.length === 0 && transition.commands.length === 0 && sameHeld(state, transition))
    return {};
  const runId = transition.run.run_id;
  const emit: EmitSpec[] = [
    ...transition.commands.flatMap((command) => nodeRequest(command, runId)),
    ...steps.flatMap((step) => runEnd(step, runId)),
  ];
  const entries = steps.map((step) => timelineEntry(step, cause, leasing.now));
  const next: OrchestratorState = {
    ...state,
    run: transition.run,
    held: transition.held,
    timeline: [...state.timeline, ...entries].slice(-TIMELINE_LIMIT),
    leases: leasesAfter(state, definitionOf(state), transition, leasing),
  };
  return { state: next, emit, dueAt: dueAtOf(next, leasing) };
}

/** The `<role>.requested` command of a node assignment (none for other commands). */
function nodeRequest(command: DagCommand, runId: string): EmitSpec[] {
  if (command.type !== "node.assign") return [];
  const payload: NodeRequested = {
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
  };
  return [{ type: agentOf(command.role).requested, payload, orderKey: runId }];
}

/** `workflow.completed|partial|failed` for the step that ended the run (none for other steps). */
function runEnd(step: DagEvent, runId: string): EmitSpec[] {
  const type = RUN_END_EVENTS[step.type];
  if (!type || !("result" in step)) return [];
  return [{ type, payload: { run_id: runId, result: step.result }, orderKey: runId }];
}

function timelineEntry(step: DagEvent, cause: Envelope, now: Date): TimelineEntry {
  return {
    at: now.toISOString(),
    event: step.type,
    ...("node_id" in step ? { node_id: step.node_id } : {}),
    ...("generation" in step ? { generation: step.generation } : {}),
    cause: cause.event_type,
  };
}

function sameHeld(state: OrchestratorState, transition: Transition): boolean {
  return JSON.stringify(state.held) === JSON.stringify(transition.held);
}
