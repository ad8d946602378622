import type { RoleModule } from "../../../functions/core/role-module";
import type { OrdersPort } from "../../../functions/roles/customer-support/integrations/orders/port";
import {
  refundAgentPorts,
  refundAgentSettings,
  refundReviewModule,
} from "../../../functions/roles/refund-review/index";
import { refundAgent, refundReviewRole } from "../../../functions/roles/refund-review/refund-agent";

/**
 * Defects planted in the refund agent's guards, each of which an invariant of the chaos runs
 * (lib/dev/faults/invariants.ts) must catch:
 * - `refund-any-order`: its write tool takes the order from the model, not from the review
 *   (no `actsOn`), so an instruction smuggled into a customer's message refunds another of the
 *   customer's orders ("refunds only the reviewed order");
 * - `refund-record-unread`: the orders are read without their refund record, so an order the shop
 *   refunded already is refunded again ("refunded once").
 */
export type PlantedRefundBug = "refund-any-order" | "refund-record-unread";

export const PLANTED_REFUND_BUGS: readonly PlantedRefundBug[] = [
  "refund-any-order",
  "refund-record-unread",
];

/** The refund agent's module with its write tools unscoped: they act on any order named. */
export function refundReviewOfAnyOrder(): RoleModule<unknown> {
  const unscoped: typeof refundReviewModule = {
    ...refundReviewModule,
    build(ports, settings) {
      const agentPorts = refundAgentPorts(ports);
      const agentSettings = refundAgentSettings(settings);
      const agent = refundAgent(agentPorts, agentSettings);
      const tools = agent.tools.map(({ actsOn: _unscoped, ...tool }) => tool);
      return refundReviewRole(agentPorts, agentSettings, { ...agent, tools });
    },
  };
  return unscoped as RoleModule<unknown>;
}

/** The role modules, with the refund agent's unscoped when `bug` says so. */
export function withRefundBug(
  bug: string | undefined,
  modules: readonly RoleModule<unknown>[],
): readonly RoleModule<unknown>[] {
  if (bug !== "refund-any-order") return modules;
  return modules.map((m) => (m === refundReviewModule ? refundReviewOfAnyOrder() : m));
}

/** The orders as a role reads them with the defect: no refund record on any. */
export function withoutRefundRecords(orders: OrdersPort): OrdersPort {
  return {
    get: async (orderId) => {
      const order = await orders.get(orderId);
      if (!order) return undefined;
      const { refund: _unread, ...rest } = order;
      return rest;
    },
    ...(orders.cancelForRefund ? { cancelForRefund: orders.cancelForRefund.bind(orders) } : {}),
  };
}
