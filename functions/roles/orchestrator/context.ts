import type { Envelope, EventPayloads, EventType } from "../../../schemas";
import type { WorkflowRejected } from "../../../schemas/events/workflow";
import type { WorkflowDefinition } from "../../core/dag/definition";
import { DagRequestError } from "../../core/dag/errors";
import type { Capacity, Transition } from "../../core/dag/run";
import type { TypedDecision } from "../../core/define-role";
import { BusinessRejection, PermanentError } from "../../core/errors";
import { payloadOf } from "../../core/payload";
import type { StepRoles, WorkflowCatalog } from "./catalog";
import type { ChildEmit } from "./child-commands";
import type { Leasing } from "./leases";
import type { OrchestratorState } from "./state";

/**
 * What every orchestrator handler shares: its context, how it reads its event's payload, and how
 * a request the run cannot satisfy becomes `workflow.rejected`.
 *
 * Payloads are read with `payloadOf`, typed by the registry: the pipeline validated each event
 * (upcast to its type's newest version) before `decide`, so a handler does not parse it again.
 */

/** What a handler works with: the run's stored state (parsed), the event, leases, capacity. */
export interface RunContext {
  readonly state: OrchestratorState | undefined;
  readonly event: Envelope;
  readonly leasing: Leasing;
  /** Queue depths and the gate threshold for a release pass over `def`'s roles. */
  readonly capacityFor: (def: WorkflowDefinition) => Promise<Capacity>;
  /** The workflow definitions the orchestrator knows. */
  readonly workflows: WorkflowCatalog;
  /** The step roles of the stack, which carry out the nodes. */
  readonly stepRoles: StepRoles;
}

/** The definition a run was started with (its name and version are in the run). */
export function definitionOf(
  { workflows }: Pick<RunContext, "workflows">,
  state: OrchestratorState,
): WorkflowDefinition {
  return workflows.at(state.run.workflow.name, state.run.workflow.version);
}

/** How a run ended (./apply). */
export type RunEnd =
  | "workflow.completed"
  | "workflow.partial"
  | "workflow.failed"
  | "workflow.cancelled";
/**
 * A step role's command: the stack's (./catalog StepRoles), known at run time only, so typed as
 * any registered type; the registry checks each on emit.
 */
export type StepCommand = EventType;
/** What a decision emits: the step roles' commands, how the run ended, and child runs' messages. */
export type OrchestratorEmit = StepCommand | RunEnd | ChildEmit;
export type OrchestratorDecision = TypedDecision<OrchestratorState, OrchestratorEmit>;
export type Handle<P> = (
  context: RunContext,
  payload: P,
) => OrchestratorDecision | Promise<OrchestratorDecision>;

/** How the orchestrator takes one event type: the run the event is about, and its decision. */
export interface EventHandler {
  /** The run (`dag_run/<run_id>`) the event is about: its payload's run_id. */
  readonly runOf: (event: Envelope) => string;
  readonly decide: (context: RunContext) => Promise<OrchestratorDecision>;
}

/** The event types whose payload names a run: the only ones the orchestrator can take. */
export type RunEventType = {
  [K in EventType]: EventPayloads[K] extends { readonly run_id: string } ? K : never;
}[EventType];

/**
 * A handler for a message addressed to a run from outside (aggregate dag_run/<run_id>, version 0):
 * its aggregate must be the run its payload names.
 */
export function toRun<K extends RunEventType>(
  type: K,
  handle: Handle<EventPayloads[K]>,
): EventHandler {
  return {
    runOf: (event) => runIdOf(event, type),
    decide: async (context) => {
      const { event } = context;
      const runId = runIdOf(event, type);
      if (event.aggregate.id !== runId)
        throw new PermanentError(
          "workflow.aggregate_mismatch",
          `${event.event_type} names run ${runId} in its payload but aggregate ${event.aggregate.type}/${event.aggregate.id}`,
        );
      return handle(context, payloadOf(event, type));
    },
  };
}

/**
 * A handler for a message on another aggregate's stream: an agent's outcome (on the stream of its
 * agent run), a child run's start or cancel (on its parent's), its end (on its own).
 */
export function fromAgent<K extends RunEventType>(
  type: K,
  handle: Handle<EventPayloads[K]>,
): EventHandler {
  return {
    runOf: (event) => runIdOf(event, type),
    decide: async (context) => handle(context, payloadOf(context.event, type)),
  };
}

/** The run an event of `type` names (typed as any run event's: a generic K hides run_id). */
function runIdOf(event: Envelope, type: RunEventType): string {
  return payloadOf(event, type).run_id;
}

export function existing(
  state: OrchestratorState | undefined,
  runId: string,
  request: WorkflowRejected["request"],
  nodeId?: string,
): OrchestratorState {
  if (state) return state;
  throw rejection(request, runId, nodeId, "workflow.unknown_run", `run ${runId} was never started`);
}

/** Run a DAG request; a request the run cannot satisfy becomes `workflow.rejected`. */
export function refusing(
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

/** A refusal of an operator request: business class, recorded as `workflow.rejected`. */
export function rejection(
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
