import { OrderRecord } from "../../events/conversation";
import type { OrdersPort } from "./port";

/**
 * An OrdersPort over a fixed list, with the table's contract (one refund key may claim an order):
 * the orders integration's twin (tests, the simulation, the role kit).
 */
export function ordersFrom(records: readonly OrderRecord[]): OrdersPort {
  const byId = new Map(records.map((r) => [r.order_id, OrderRecord.parse(r)]));
  const refundKeys = new Map<string, string>();
  return {
    get: async (orderId) => byId.get(orderId),
    async cancelForRefund(orderId, refundKey, from) {
      const order = byId.get(orderId);
      if (!order) return { cancelled: false, status: "missing" };
      if (!from.includes(order.status)) return { cancelled: false, status: order.status };
      const claimed = refundKeys.get(orderId);
      if (claimed !== undefined && claimed !== refundKey)
        return { cancelled: false, status: "claimed" };
      const cancelled = { ...order, status: "cancelled" as const };
      byId.set(orderId, cancelled);
      refundKeys.set(orderId, refundKey);
      return { cancelled: true, order: cancelled };
    },
  };
}
