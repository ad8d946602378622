import type { Envelope } from "../../schemas";
import type { NodeCancelRequested } from "../../schemas/events/workflow-cancel";
import type { DiscardReason, EventStore } from "./ports";

/**
 * How a role that carries out workflow steps finds that an assignment it is about to work on no
 * longer counts, before its work runs. The orchestrator appends a role's cancel of an assignment
 * (run, node, generation, and the item of a map node) to the run's stream, the stream and FIFO
 * group of the request it cancels, so the role always gets the cancel after that request: a
 * request still queued when its node was re-run, its map item dropped (`map_failed`), its branch
 * lost a first-wins join or its run was cancelled (each running assignment is told,
 * `run_cancelled`) would run for nothing. So, before the work, the request looks ahead on its own
 * stream: a cancel of its assignment already committed behind it discards it `cancelled`.
 *
 * The kit's step role (./step-role.ts) and the content agents (functions/roles/content-agents)
 * both do so. It costs one Query of the run's stream per request; a run's stream holds a few
 * events per node. Without the stream reader only cancels the role has already received count.
 */

/** Reads a run's stream (where the orchestrator appends the step roles' commands). */
export type CommandStream = Pick<EventStore, "readStream">;

/** The assignment a request is for: its node, generation, and the map item's index if any. */
export interface CancelledAssignment {
  readonly node_id: string;
  readonly generation: number;
  readonly item?: number;
}

/** Is a `cancelType` of `assignment` on the stream of `request`, after the request? */
export async function cancelIssued(
  stream: CommandStream | undefined,
  cancelType: string,
  request: Envelope,
  assignment: CancelledAssignment,
): Promise<boolean> {
  if (!stream) return false;
  const { node_id, generation, item } = assignment;
  const { type, id, version } = request.aggregate;
  const later = await stream.readStream({ type, id }, version + 1, Number.MAX_SAFE_INTEGER);
  return later.some((event) => {
    if (event.event_type !== cancelType) return false;
    // Read back from the stream as written: a cancel command has one schema version.
    const cancel = event.payload as NodeCancelRequested;
    return cancel.node_id === node_id && cancel.generation === generation && cancel.item === item;
  });
}

/**
 * Why a request is dropped unworked: the role's record of its assignment says CANCELLED (a cancel
 * received), or there is no record yet and a cancel of it is already on the stream (`lookAhead`).
 * A record that ended otherwise is left to the role's decision (which answers it again).
 */
export async function discardCancelled(
  recordedStatus: string | undefined,
  lookAhead: () => Promise<boolean>,
): Promise<DiscardReason | undefined> {
  if (recordedStatus === "CANCELLED") return "cancelled";
  if (recordedStatus !== undefined) return undefined;
  return (await lookAhead()) ? "cancelled" : undefined;
}
