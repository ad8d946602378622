import type { Envelope, TypedDecision } from "../../../kit";
import { payloadOf } from "../../../kit";
import {
  SUPPORT_CANCEL_REQUESTED,
  SUPPORT_CANCELLED,
  type SupportCancelled,
} from "../events/cancel";
import { type DeliveryState, deliveryOf, type TurnCancel } from "./state";

/**
 * The cancel of a support turn (`support.cancel.requested`), taken by the sender on
 * `delivery/<task_id>`. The first cancel is recorded in the state (`cancelled`: who, why, when)
 * and reported as `support.cancelled`, naming the reply keys already delivered (they stay
 * delivered). From then on every send of the task not made yet is discarded as `cancelled`
 * (./facts); a send already claimed is still resolved, never dropped. A later cancel of the
 * same turn changes nothing and emits nothing.
 */

export function decideCancel(
  state: DeliveryState | undefined,
  event: Envelope,
  now: Date,
): TypedDecision<DeliveryState, typeof SUPPORT_CANCELLED> {
  if (state?.cancelled) return {};
  const request = payloadOf(event, SUPPORT_CANCEL_REQUESTED);
  // A cancel before any send makes the state, in its own tenant.
  const current = deliveryOf(state, event);
  const { keys } = current;
  const cancelled: TurnCancel = {
    at: now.toISOString(),
    requested_by: request.requested_by,
    ...(request.reason === undefined ? {} : { reason: request.reason }),
  };
  const delivered = Object.entries(keys)
    .filter(([, fact]) => fact.outcome === "delivered")
    .map(([key]) => key)
    .slice(0, 20);
  const payload: SupportCancelled = { ...request, delivered_keys: delivered };
  const conversationId = request.conversation_id;
  return {
    state: { ...current, cancelled },
    emit: [{ type: SUPPORT_CANCELLED, payload, orderKey: conversationId, conversationId }],
  };
}
