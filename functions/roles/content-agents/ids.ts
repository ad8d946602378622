import { agentRunIdOf, assignmentKey } from "../../kit";

export { agentRunIdOf };

/**
 * The two ids of a content agent's work (seed 000 §4.1 and §4.2).
 *
 * - The agent run key, `arun_…`: one per assignment (DAG run, node, generation, and for an item
 *   of a map node its index). It is the `agent_run` aggregate id, the same through retries,
 *   redeliveries and resumes, so a repeated request finds the agent run it already answered and
 *   the DAG's node (or map item) keeps one agent run per generation (a re-run, a new generation,
 *   is a new key).
 * - The run id, `agrun_…` (the envelope's and the agent run's `run_id`): new for each run of the
 *   agent and each resume. A run is one worker's processing of the message that starts or
 *   resumes the agent run: a request, or a confirmation that resumes a BLOCKED one. A redelivery
 *   is the next run (the earlier one did not commit, so it ran the model for nothing); the model
 *   replies corrected within one run are attempts of that run, not runs.
 *
 * The run id is derived, not drawn (`agentRunIdOf`, the hub's, which the tool-using agent uses too): a hash of (group, the message's event id, its receive
 * count). That keeps it one value wherever the run needs it, without anything stored first:
 * - the acknowledgement and heartbeats (`node.started`, `node.heartbeat`), published while the
 *   model call runs and before anything commits, name the same run as the answer committed after;
 * - a decision made again in the same delivery (after a version conflict, or a lost commit whose
 *   retry finds the state moved) gives the same run id, so no two run ids can be recorded for one
 *   run; and once a run committed, a redelivery of its message is a duplicate and decides nothing,
 *   so what was committed stays as it is;
 * - a redelivery after a run that did not commit has a new receive count, hence a new run id, and
 *   a resume is a new message, hence a new run id.
 * A random id drawn in `decide` and committed with the state would give the committed answer a
 * run id the earlier acknowledgement never carried. The one case where two runs share an id: a
 * request read from the event store to fill a gap counts as a first delivery, so it gets the id its
 * own first delivery had, if that one ran and did not commit.
 */

/**
 * The agent run key of one assignment: `arun_` + 32 letters of a SHA-256 (no digit runs) of its
 * run, node and generation, and of its item's index for an item of a map node.
 */
export function agentRunKey(
  runId: string,
  nodeId: string,
  generation: number,
  item?: number,
): string {
  return assignmentKey("arun", runId, nodeId, generation, item);
}

/**
 * The fields of a command that name the assignment it is for, repeated in every answer: the node,
 * and for an item of a map node the item (a request carries it whole, a cancel or an answer its
 * index).
 */
export interface NodeRef {
  readonly run_id: string;
  readonly node_id: string;
  readonly generation: number;
  readonly item?: number | { readonly index: number };
}

/** The map item a command names (its index), for an item of a map node. */
export function itemIndexOf(command: Pick<NodeRef, "item">): number | undefined {
  const { item } = command;
  return typeof item === "object" ? item.index : item;
}
