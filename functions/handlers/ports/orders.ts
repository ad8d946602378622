import * as z from "../../../schemas/zod";
import { DynamoOrders } from "../../adapters/dynamodb/orders";
import { parseEnv } from "../../core/parse-env";
import type { OrdersPort } from "../../core/role-module";
import type { PortWiring } from "../role-ports";

/** `needs.orders`: the orders table, `ORDERS_TABLE` (GetItem only). */
export function ordersPort({ env, group, dynamodb, overrides }: PortWiring): OrdersPort {
  if (overrides.orders) return overrides.orders;
  const parsed = parseEnv(z.object({ ORDERS_TABLE: z.string().check(z.minLength(1)) }), env, group);
  return new DynamoOrders(dynamodb, parsed.ORDERS_TABLE);
}
