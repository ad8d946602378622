// The commands built here are the customer-support application's: importing its types defines them.
import "../../functions/roles/customer-support/events/index";
import { SUPPORT_CANCEL_REQUESTED } from "../../functions/roles/customer-support/events/cancel";
import {
  type RouteState,
  SUPPORT_ROUTE_AGGREGATE,
} from "../../functions/roles/customer-support/router/router";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import { loadDelivery, loadReply, stateData } from "./customer-support";
import type { OpsStack } from "./stack";
import {
  type Decided,
  inConversation,
  inConversationTenant,
  type SupportCommand,
} from "./support-actions";

/**
 * Cancelling a support turn (`support.cancel.requested`), checked against the stored state before
 * it is sent, as the other support decisions are (./support-actions): a turn already cancelled is
 * reported (`already`); a turn that is not found, or whose reply was already delivered, is refused
 * (a delivered reply stays delivered). The conversation, which orders the command with the turn's
 * sends, is read from the reply or, before there is one, from the route.
 */

/** The conversation of a command is read from the stored state; this stands in until then. */
const UNKNOWN_CONVERSATION = "conv_unknown";

/** `support.cancel.requested` for the turn of task `taskId`. */
export function cancelCommand(
  taskId: string,
  reason: string | undefined,
  requestedBy: string,
): SupportCommand {
  return {
    type: SUPPORT_CANCEL_REQUESTED,
    aggregate: { type: "delivery", id: taskId },
    taskId,
    conversationId: UNKNOWN_CONVERSATION,
    payload: {
      conversation_id: UNKNOWN_CONVERSATION,
      requested_by: requestedBy,
      ...(reason === undefined ? {} : { reason }),
    },
  };
}

/** What a cancel needs: the turn's conversation and the sender's state of the task. */
export interface CancelFacts {
  readonly conversationId?: string;
  readonly delivery?: DeliveryState;
}

/** Whether the turn of `command` can be cancelled. */
export function cancelDecision(command: SupportCommand, facts: CancelFacts): Decided {
  const id = command.taskId;
  if (facts.conversationId === undefined)
    return { refused: `no support turn of task ${id} (nothing routed or generated for it)` };
  const cancelled = facts.delivery?.cancelled;
  if (cancelled)
    return { already: `the turn of ${id} was already cancelled by ${cancelled.requested_by}` };
  const delivered = Object.entries(facts.delivery?.keys ?? {}).find(
    ([, fact]) => fact.outcome === "delivered",
  );
  if (delivered)
    return {
      refused: `the reply of ${id} was already delivered (${delivered[0]}): it stays delivered`,
    };
  return inConversation(command, facts.conversationId);
}

/** Read what `cancelDecision` needs from the stack and decide (see inConversationTenant). */
export async function cancelCheck(
  stack: OpsStack,
  command: SupportCommand,
  tenant?: string,
): Promise<Decided> {
  const id = command.taskId;
  const reply = await loadReply(stack, id);
  const route = reply ? undefined : await stateData<RouteState>(stack, SUPPORT_ROUTE_AGGREGATE, id);
  const delivery = await loadDelivery(stack, id);
  const decided = cancelDecision(command, {
    conversationId: reply?.conversation_id ?? route?.conversation_id,
    delivery,
  });
  return inConversationTenant(stack, decided, tenant);
}
