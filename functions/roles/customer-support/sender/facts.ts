import type { DiscardReason, Envelope, EventOf } from "../../../kit";
import type { OrderRecord, SendRequested } from "../events/conversation";
import type { OrdersPort } from "../integrations/orders/port";

/**
 * Whether a reply is still worth sending (seed 000 §11.5), checked by the sender before it sends
 * and before any channel call, in this order:
 *
 * 1. the turn was cancelled (`support.cancel.requested`, recorded in `delivery/<task_id>`) ->
 *    `cancelled`;
 * 2. the command's `input_version` < the conversation's current version (a newer customer message
 *    arrived) -> `superseded`;
 * 3. the reply rests on an order (`rests_on`) and the order read now differs in its status, its
 *    refund's status or its refund's `updated_at`, is gone, or belongs to another customer ->
 *    `invalidated_by_state_change` (for example the refund went through after the lookup: the
 *    reply would tell the customer it is still pending).
 * The orders port's errors propagate with their class (a TransientError is retried by the queue).
 */

/** What a reply to a request with this order rests on. */
export type RestsOn = NonNullable<SendRequested["rests_on"]>;

/** The facts of `order` a reply quoting it rests on. */
export function restsOn(order: OrderRecord): RestsOn {
  return {
    order_id: order.order_id,
    status: order.status,
    ...(order.refund === undefined ? {} : { refund_status: order.refund.status }),
    ...(order.refund?.updated_at === undefined
      ? {}
      : { refund_updated_at: order.refund.updated_at }),
  };
}

/** True when `order`, read now for `customerId`, still shows what the reply rests on. */
export function stillHolds(
  facts: RestsOn,
  order: OrderRecord | undefined,
  customerId: string,
): boolean {
  if (order === undefined || order.customer_id !== customerId) return false;
  const now = restsOn(order);
  return (
    now.status === facts.status &&
    now.refund_status === facts.refund_status &&
    now.refund_updated_at === facts.refund_updated_at
  );
}

export interface SendChecks {
  /** The conversation of the command, read now: its current version (0 when it has none). */
  readonly conversation: (event: Envelope) => Promise<{ readonly version: number }>;
  /** Where the orders are read again; without it a reply's facts are not re-checked. */
  readonly orders?: OrdersPort;
}

/** Why a send command is no longer worth sending, in the order above; undefined: send it. */
export async function staleReason(
  cancelled: boolean,
  event: EventOf<"notification.send.requested">,
  checks: SendChecks,
): Promise<DiscardReason | undefined> {
  if (cancelled) return "cancelled";
  const request = event.payload;
  if (event.input_version !== undefined) {
    const { version } = await checks.conversation(event);
    if (event.input_version < version) return "superseded";
  }
  const facts = request.rests_on;
  if (facts === undefined || checks.orders === undefined) return undefined;
  const order = await checks.orders.get(facts.order_id);
  return stillHolds(facts, order, request.customer_id) ? undefined : "invalidated_by_state_change";
}
