import type { RecordedDecision, Role } from "../../../kit";
import {
  type DescriptorOf,
  defineRole,
  PermanentError,
  payloadOf,
  TransientError,
} from "../../../kit";
import type { ReplyGenerationRequested } from "../events/commands";
import type { OrderLookupCompleted } from "../events/conversation";
import { factFields } from "../fact-fields";
import type { OrdersPort } from "../integrations/orders/port";
import { STEP_FAILED_EMITS, type StepFailedEmit, stepFailedDecision } from "../step-failure";

/**
 * The order lookup group: reads the order the customer asked about and hands the facts on to
 * reply generation.
 *
 * One `order.lookup.requested` per task, on the stream `order_lookup/<task_id>`:
 * `order.lookup.completed` (found or not, with the order when found), then
 * `reply.generation.requested` (with the order when found). An order that belongs to another
 * customer counts as not found, and nothing of it is emitted. Errors of the orders port propagate
 * with their class (a TransientError is retried by the queue); one that is permanent, or still
 * there on the queue's last attempt, ends the step with `support.step.failed` and the hand-off
 * message (../step-failure.ts). A redelivered request, once the
 * lookup is stored, emits nothing.
 *
 * Every emitted event keeps the request's `input_version`, the conversation id and
 * `order_key` = conversation id; the command also keeps its `expires_at`.
 */

export const ORDER_LOOKUP_AGGREGATE = "order_lookup";

export interface OrderLookupState {
  readonly task_id: string;
  readonly conversation_id: string;
  readonly order_id: string;
  readonly found: boolean;
  readonly looked_up_at: string;
}

export interface OrderLookupOptions {
  readonly orders: OrdersPort;
}

export const ORDER_LOOKUP: DescriptorOf<"order.lookup.requested", OrderLookupEmit> = {
  group: "order-lookup",
  subscriptions: ["order.lookup.requested"],
  emits: ["order.lookup.completed", "reply.generation.requested", ...STEP_FAILED_EMITS],
  stateOf: (event) => ({ type: ORDER_LOOKUP_AGGREGATE, id: event.task_id }),
  // Folded with the answer the lookup recorded, not the orders table as it is now: an order
  // changed or deleted since would otherwise make every old lookup differ from its fold.
  foldWith: (recorded) => orderLookupRole({ orders: recordedOrders(recorded) }) as Role<unknown>,
};

export function orderLookupRole(options: OrderLookupOptions): Role<OrderLookupState> {
  const { orders } = options;
  return defineRole<OrderLookupState, "order.lookup.requested", OrderLookupEmit>({
    ...ORDER_LOOKUP,
    failed: (_state, event, failure, { now }) =>
      stepFailedDecision("order_lookup", event, failure, now),
    async decide(existing, event, { now }) {
      if (existing) return {};
      const request = event.payload;
      const record = await orders.get(request.order_id);
      const order =
        record !== undefined && record.customer_id === request.customer_id ? record : undefined;
      const fact = factFields(event, request.conversation_id);
      const completed: OrderLookupCompleted = {
        conversation_id: request.conversation_id,
        order_id: request.order_id,
        found: order !== undefined,
        ...(order === undefined ? {} : { order }),
        looked_up_at: now.toISOString(),
      };
      const next: ReplyGenerationRequested = {
        ...request,
        ...(order === undefined ? {} : { order }),
      };
      return {
        state: {
          task_id: event.task_id,
          conversation_id: request.conversation_id,
          order_id: request.order_id,
          found: order !== undefined,
          looked_up_at: now.toISOString(),
        },
        emit: [
          { type: "order.lookup.completed", payload: completed, ...fact },
          {
            type: "reply.generation.requested",
            payload: next,
            ...fact,
            expiresAt: event.expires_at,
          },
        ],
      };
    },
  });
}

/** The lookup's fact and the reply request; on a failure for good, the step's failure facts. */
type OrderLookupEmit = "order.lookup.completed" | "reply.generation.requested" | StepFailedEmit;

/**
 * The orders port as the lookup's decision on one event found it, from the facts it emitted:
 * `order.lookup.completed` gives the order (or none), `support.step.failed` the permanent error it
 * met. A request the group has not decided on has no recorded answer: a TransientError says so.
 */
export function recordedOrders(recorded: RecordedDecision): OrdersPort {
  return {
    get: async (orderId) => {
      for (const event of recorded.emitted) {
        if (event.event_type === "order.lookup.completed") {
          const completed = payloadOf(event, "order.lookup.completed");
          return completed.order_id === orderId ? completed.order : undefined;
        }
        if (event.event_type === "support.step.failed") {
          const failed = payloadOf(event, "support.step.failed");
          throw new PermanentError(failed.code, failed.message);
        }
      }
      throw new TransientError(
        "fold.not_recorded",
        `order-lookup has recorded no answer for order ${orderId} (it has not handled the request yet)`,
      );
    },
  };
}
