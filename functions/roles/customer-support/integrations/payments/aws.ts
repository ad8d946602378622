import * as z from "../../../../../schemas/zod";
import { parseEnv } from "../../../../kit";
import { defineAdapter } from "../../../../lambda";
import { DynamoPaymentsStandIn } from "./dynamodb-stand-in";
import { payments } from "./index";

/** The payment stand-in's table, `PAYMENTS_TABLE`. */
export const paymentsAdapter = /* @__PURE__ */ defineAdapter(payments, ({ env, group, client }) => {
  const parsed = parseEnv(
    z.object({ PAYMENTS_TABLE: z.string().check(z.minLength(1)) }),
    env,
    group,
  );
  return new DynamoPaymentsStandIn({
    client: client("dynamodb"),
    tableName: parsed.PAYMENTS_TABLE,
  });
});
