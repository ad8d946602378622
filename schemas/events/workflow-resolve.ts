import { OpaqueId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { NodeId, RequestedByShape } from "./fields";
import { outsideCommand } from "./kinds";

/**
 * Resolving a FAILED node by hand (seed 001 §2.3, HumanResolved of an agent run
 * that ended NEEDS_HUMAN): an operator supplies the node's output. The orchestrator checks it
 * against the output schema of the node's role, counts the node COMPLETED with it under a new
 * generation (its descendants run again), and tells the agent the failed assignment is resolved.
 */

/** The most an operator-supplied output may hold, as JSON (the envelope's payload must fit). */
export const MAX_RESOLVED_OUTPUT_BYTES = 64 * 1024;

export const WorkflowResolveRequestedPayload = z.object({
  run_id: OpaqueId,
  node_id: NodeId,
  /** The node's output, in the shape its role's agent would have answered with. */
  output: z.record(z.string(), z.unknown()),
  ...RequestedByShape,
});
export type WorkflowResolveRequested = z.infer<typeof WorkflowResolveRequestedPayload>;

export function defineWorkflowResolveEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideCommand,
      type: "workflow.resolve.requested",
      description:
        "Resolve a FAILED node with an output an operator supplies (aggregate dag_run/<run_id>, version 0): the node counts as COMPLETED with it and the nodes below it run again.",
      payload: WorkflowResolveRequestedPayload,
    }),
  ] as const;
}
