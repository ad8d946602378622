import { IsoTime } from "../envelope";
import { OpaqueId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { NodeRefShape, RequestedByShape } from "./fields";
import { outsideCommand, outsideFact } from "./kinds";

/**
 * Wait nodes of a run (functions/core/dag/wait.ts): a node that waits for a time, or for a signal
 * with that time as its deadline.
 *
 * - `workflow.signal.requested`: an operator or a client sends signal `signal` to a run
 *   (unsequenced, aggregate `dag_run/<run_id>` at version 0, like the other run commands, and so
 *   obeyed in the run's tenant only). It releases every wait node of the run RUNNING for that
 *   signal, whose output then carries `payload`; when none waits for it, the run records
 *   `signal.unmatched` and nothing else changes.
 * - `node.wait.expired`: the sweeper found a wait node's time come (its timer ran out, or the
 *   deadline of the signal it waits for passed).
 */

/** The key of a signal, as a wait node's `signal` names it. */
export const SignalKey = z.string().check(z.minLength(1), z.maxLength(128));

/** The most a signal's payload may hold, as JSON: it becomes the wait node's output. */
export const MAX_SIGNAL_PAYLOAD_BYTES = 64 * 1024;

const jsonBytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).length;

/** A signal's payload: a JSON object of at most MAX_SIGNAL_PAYLOAD_BYTES. */
export const SignalPayload = z.record(z.string(), z.unknown()).check(
  z.refine((value) => jsonBytes(value) <= MAX_SIGNAL_PAYLOAD_BYTES, {
    message: `must be at most ${MAX_SIGNAL_PAYLOAD_BYTES} bytes of JSON`,
  }),
);

export const WorkflowSignalRequestedPayload = z.object({
  run_id: OpaqueId,
  signal: SignalKey,
  /** What the wait nodes released by the signal answer with (`{}` when absent). */
  payload: z.optional(SignalPayload),
  ...RequestedByShape,
});
export type WorkflowSignalRequested = z.infer<typeof WorkflowSignalRequestedPayload>;

export const NodeWaitExpiredPayload = z.object({
  ...NodeRefShape,
  /** When the wait's time came: its timer, or the deadline of its signal. */
  due_at: IsoTime,
});
export type NodeWaitExpired = z.infer<typeof NodeWaitExpiredPayload>;

export function defineWorkflowWaitEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideCommand,
      type: "workflow.signal.requested",
      description:
        "Send a signal to a run (aggregate dag_run/<run_id>, version 0): the wait nodes RUNNING for it complete with its payload; none waiting is recorded as signal.unmatched.",
      payload: WorkflowSignalRequestedPayload,
    }),
    registry.define({
      ...outsideFact,
      type: "node.wait.expired",
      description:
        "The sweeper found a wait node's time come: its timer ran out (it completes), or the deadline of the signal it waits for passed (it fails, dag.wait_deadline).",
      payload: NodeWaitExpiredPayload,
    }),
  ] as const;
}
