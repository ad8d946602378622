import * as z from "../../../schemas/zod";
import { DynamoPaymentsStandIn } from "../../adapters/dynamodb/payments-stand-in";
import { parseEnv } from "../../core/parse-env";
import type { PaymentsPort } from "../../core/payments";
import type { PortWiring } from "../role-ports";

/** `needs.payments`: the payment stand-in's table, `PAYMENTS_TABLE`. */
export function paymentsPort({ env, group, dynamodb, overrides }: PortWiring): PaymentsPort {
  if (overrides.payments) return overrides.payments;
  const parsed = parseEnv(
    z.object({ PAYMENTS_TABLE: z.string().check(z.minLength(1)) }),
    env,
    group,
  );
  return new DynamoPaymentsStandIn({ client: dynamodb, tableName: parsed.PAYMENTS_TABLE });
}
