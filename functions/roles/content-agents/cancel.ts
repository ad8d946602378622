import type { Envelope, TypedDecision } from "../../kit";
import { type AgentRun, cancelIssued, payloadOf, transition } from "../../kit";
import { CONTENT_ROLES, contentEventTypes } from "./events";
import { itemIndexOf, type NodeRef } from "./ids";
import type { ContentAgent } from "./settings";

/**
 * How a content agent honours a cancel (seed 001 §4, TaskCancel on the command channel). The
 * orchestrator sends `<stem>.cancel.requested` for one assignment (run, node, generation, and the
 * item for an item of a map node) on the run's stream: the stream, and the FIFO group, of the `<stem>.requested` it cancels, so the
 * agent's group always gets it after that request. Hence:
 *
 * - Before any model call, a request looks ahead on its own stream, as the kit's step role does
 *   (the kit's `cancelIssued` and `discardCancelled`, functions/core/cancel-look-ahead.ts): a
 *   cancel of its assignment already committed behind it -> the request is discarded `cancelled`
 *   (no model call).
 * - Once its model call is over, it looks again (the call may have been long): a cancel committed
 *   meanwhile -> the agent run ends CANCELLED (RUNNING -TaskCancelled-> CANCELLED), nothing is
 *   answered, and the request is recorded discarded `cancelled`.
 * - The cancel itself, when it arrives: an assignment the agent never worked on is stored as a
 *   CANCELLED agent run (IDLE -TaskCancelled-> CANCELLED), so a request for it that comes later
 *   (redriven from a dead-letter queue, say) is discarded; an agent run that already ended
 *   (answered, or cancelled) stays as it is, and the DAG ignores an answer it sent.
 *
 * The look-ahead needs the stream reader (`commandStream`); without one only cancels the agent
 * has already received are honoured. It costs one Query of the run's stream before and one after
 * each model call; a run's stream holds a few events per node.
 */

/**
 * Is a cancel of `assignment` (the one `request` names) on the request's stream, after the
 * request? (the kit's `cancelIssued`, given the content command's map item as its index)
 */
export function cancelBehind(
  agent: Pick<ContentAgent, "commandStream" | "types">,
  request: Envelope,
  assignment: NodeRef,
): Promise<boolean> {
  const { node_id, generation } = assignment;
  const item = itemIndexOf(assignment);
  return cancelIssued(agent.commandStream, agent.types.cancel, request, {
    node_id,
    generation,
    ...(item === undefined ? {} : { item }),
  });
}

/** The cancel command of every content role (`decideCancel` is not told which agent it serves). */
const CANCEL_TYPES = atLeastOne(CONTENT_ROLES.map((role) => contentEventTypes(role).cancel));

/**
 * A received cancel: a new agent run (`fresh`, IDLE) stored CANCELLED when the assignment was
 * never worked on; a BLOCKED agent run ends CANCELLED (it no longer waits for its confirmation);
 * an agent run waiting for a person (NEEDS_HUMAN) whose node an operator
 * resolved ends COMPLETED (HumanResolved), one whose node was reset ends CANCELLED (the retry is
 * a new agent run under the next generation); nothing for an agent run that ended otherwise.
 */
export function decideCancel(
  existing: AgentRun | undefined,
  event: Envelope,
  fresh: () => AgentRun,
  now: Date,
): TypedDecision<AgentRun, never> {
  const cancel = payloadOf(event, ...CANCEL_TYPES);
  const item = cancel.item === undefined ? "" : ` item ${cancel.item}`;
  const reason = `${cancel.reason}: ${event.event_type} ${event.event_id} for run ${cancel.run_id} node ${cancel.node_id}${item} generation ${cancel.generation}`;
  if (!existing) return { state: transition(fresh(), "TaskCancelled", { now, reason }) };
  if (existing.state === "BLOCKED")
    return { state: transition(existing, "TaskCancelled", { now, reason }) };
  if (existing.state !== "NEEDS_HUMAN") return {};
  if (cancel.reason === "resolved")
    return { state: transition(existing, "HumanResolved", { now, reason }) };
  if (cancel.reason === "reset")
    return { state: transition(existing, "TaskCancelled", { now, reason }) };
  return {};
}

/** A run in progress whose cancel was committed while its model call ran: CANCELLED, no answer. */
export function cancelledWhileRunning(run: AgentRun, now: Date): TypedDecision<AgentRun, never> {
  const reason = "cancelled while its model call ran; the answer is dropped";
  return {
    state: transition(run, "TaskCancelled", { now, reason }),
    discarded: "cancelled",
  };
}

function atLeastOne<T>(values: readonly T[]): readonly [T, ...T[]] {
  const [first, ...rest] = values;
  if (first === undefined) throw new Error("expected at least one value");
  return [first, ...rest];
}
