import type { OrderRecord } from "../../events/conversation";

/**
 * Sample orders for the local runtime and tests: three customers, and the cases the support
 * workflow distinguishes (a refund submitted, delivered with no refund, cancelled and refunded,
 * a refund rejected, in transit, just placed).
 */
export const SAMPLE_ORDERS: OrderRecord[] = [
  {
    order_id: "123",
    customer_id: "cust_alice",
    status: "returned",
    item: "Wireless earbuds",
    total_cents: 4999,
    currency: "USD",
    refund: { status: "submitted", amount_cents: 4999, updated_at: "2026-08-31T09:30:00Z" },
  },
  {
    order_id: "A-1001",
    customer_id: "cust_alice",
    status: "shipped",
    item: "Running shoes, size 39",
    total_cents: 8900,
    currency: "USD",
  },
  {
    order_id: "A-1002",
    customer_id: "cust_alice",
    status: "placed",
    item: "Rain jacket, size M",
    total_cents: 12900,
    currency: "USD",
  },
  {
    order_id: "456",
    customer_id: "cust_bob",
    status: "delivered",
    item: "Cast iron skillet",
    total_cents: 3450,
    currency: "EUR",
    refund: { status: "none" },
  },
  {
    order_id: "B-2002",
    customer_id: "cust_bob",
    status: "cancelled",
    item: "Desk lamp",
    total_cents: 2599,
    currency: "EUR",
    refund: { status: "refunded", amount_cents: 2599, updated_at: "2026-08-20T14:05:00Z" },
  },
  {
    order_id: "789",
    customer_id: "cust_carol",
    status: "delivered",
    item: "Yoga mat",
    total_cents: 2999,
    currency: "GBP",
    refund: { status: "rejected", amount_cents: 2999, updated_at: "2026-08-28T11:00:00Z" },
  },
  {
    order_id: "C-3003",
    customer_id: "cust_carol",
    status: "placed",
    item: "Coffee grinder",
    total_cents: 6500,
    currency: "GBP",
  },
];
