import * as z from "../../../../../schemas/zod";
import { parseEnv } from "../../../../kit";
import { defineAdapter } from "../../../../lambda";
import { DynamoOrders } from "./dynamodb";
import { orders } from "./index";

/** The orders table, `ORDERS_TABLE` (GetItem; the conditional UpdateItem of a cancel). */
export const ordersAdapter = /* @__PURE__ */ defineAdapter(orders, ({ env, group, client }) => {
  const parsed = parseEnv(z.object({ ORDERS_TABLE: z.string().check(z.minLength(1)) }), env, group);
  return new DynamoOrders(client("dynamodb"), parsed.ORDERS_TABLE);
});
