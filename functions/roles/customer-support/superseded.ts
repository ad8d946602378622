import type { Envelope, TypedDecision } from "../../kit";
import { PermanentError } from "../../kit";
import type { ConversationSnapshot } from "./conversation/conversation";
import { SUPPORT_SUPERSEDED } from "./events/superseded";
import { factFields } from "./fact-fields";

/**
 * A turn that will get no reply says so (seed 000 §11.5): reply generation and the sender drop a
 * turn's work as `superseded` when a newer message of the customer made it stale, and with that
 * discard (`Role.discarded`) they append `support.superseded` to their own stream, naming the
 * turn that answers instead: the conversation's newest, read with the superseded check. The
 * conversation view folds it into the turn (`superseded`, `superseded_by`). One group drops a
 * turn's work: reply generation drops its request, so no send of it follows; the sender drops
 * its send. Like the failure facts (./step-failure.ts), it leaves the group's state as it was.
 */

export type SupersededEmit = typeof SUPPORT_SUPERSEDED;

/** The fact that `event`'s turn is superseded by the newest turn of `conversation`. */
export function supersededDecision<S>(
  event: Envelope,
  conversationId: string,
  conversation: Pick<ConversationSnapshot, "version" | "newestTask">,
): TypedDecision<S, SupersededEmit> {
  const answering = conversation.newestTask;
  if (answering === undefined)
    throw new PermanentError(
      "conversation.context_missing",
      `conversation ${conversationId} has no message at its version ${conversation.version} in its state`,
      { details: { conversation_id: conversationId, version: conversation.version } },
    );
  return {
    emit: [
      {
        type: SUPPORT_SUPERSEDED,
        payload: { conversation_id: conversationId, superseded_by: answering },
        ...factFields(event, conversationId),
      },
    ],
  };
}
