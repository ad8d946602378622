import type { z } from "zod";
import type { Envelope } from "../../schemas";
import type { WorkflowRejected } from "../../schemas/events/workflow";
import type { WorkflowDefinition } from "../core/dag/definition";
import { DagRequestError } from "../core/dag/errors";
import type { Capacity, Transition } from "../core/dag/run";
import { BusinessRejection, PermanentError } from "../core/errors";
import type { Decision } from "../core/pipeline";
import type { Leasing } from "./orchestrator-leases";
import { type OrchestratorState, parseWith } from "./orchestrator-state";

/**
 * What every orchestrator handler shares: its context, how payloads are parsed, and how a request
 * the run cannot satisfy becomes `workflow.rejected`.
 */

/** What a handler works with: the run's stored state (parsed), the event, leases, capacity. */
export interface RunContext {
  readonly state: OrchestratorState | undefined;
  readonly event: Envelope;
  readonly leasing: Leasing;
  /** Queue depths and the gate threshold for a release pass over `def`'s roles. */
  readonly capacityFor: (def: WorkflowDefinition) => Promise<Capacity>;
}

export type OrchestratorDecision = Decision<OrchestratorState>;
export type EventHandler = (context: RunContext) => Promise<OrchestratorDecision>;
export type Handle<P> = (
  context: RunContext,
  payload: P,
) => OrchestratorDecision | Promise<OrchestratorDecision>;

/** The payload of an event, parsed with its schema (invalid: orchestrator.invalid_payload). */
export function parsePayload<S extends z.ZodType>(schema: S, event: Envelope): z.output<S> {
  const what = `the payload of ${event.event_type} ${event.event_id}`;
  return parseWith(schema, event.payload, "orchestrator.invalid_payload", what);
}

/**
 * A handler for a message addressed to a run from outside (aggregate dag_run/<run_id>, version 0):
 * its aggregate must be the run its payload names.
 */
export function toRun<P extends { run_id: string }>(
  schema: z.ZodType<P>,
  handle: Handle<P>,
): EventHandler {
  return async (context) => {
    const payload = parsePayload(schema, context.event);
    const { event } = context;
    if (event.aggregate.id !== payload.run_id)
      throw new PermanentError(
        "workflow.aggregate_mismatch",
        `${event.event_type} names run ${payload.run_id} in its payload but aggregate ${event.aggregate.type}/${event.aggregate.id}`,
      );
    return handle(context, payload);
  };
}

/** A handler for an agent's outcome (on the stream of its agent run). */
export function fromAgent<P>(schema: z.ZodType<P>, handle: Handle<P>): EventHandler {
  return async (context) => handle(context, parsePayload(schema, context.event));
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
