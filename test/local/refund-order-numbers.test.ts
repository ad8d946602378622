import { describe, expect, it } from "vitest";
import { routeMessage } from "../../functions/roles/customer-support/router/router";
import { newOrderNumber } from "../../lib/dev/local/scenario/refund";

/**
 * The refund scenario's orders: every question it asks about one is routed to the refund agent.
 * A random ULID tail without a digit (about one in ninety) was not an order number to the router,
 * and the refund e2e tests waited for a run that never started.
 */
describe("the refund scenario's order numbers", () => {
  it("are each read by the router as the order of a refund question", () => {
    const numbers = Array.from({ length: 2000 }, newOrderNumber);
    expect(new Set(numbers).size).toBe(numbers.length);
    const misrouted = numbers.filter((orderId) => {
      const route = routeMessage(`Please refund order ${orderId}`);
      return route.intent !== "refund" || route.order_id !== orderId;
    });
    expect(misrouted).toEqual([]);
  });
});
