import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { kmsKeyWrapping } from "../adapters/aws/kms-key-wrapping";
import { DynamoCustomerKeys } from "../adapters/dynamodb/customer-keys";
import { parseEnv } from "../core/parse-env";
import { Vault } from "../core/personal-data/vault";
import type { Clock } from "../core/ports";

/** Where a function finds the customers' data keys (lib/infra/constructs/customer-keys.ts). */
export const VaultEnv = z
  .object({
    CUSTOMER_KEYS_TABLE: z.optional(z.string().check(z.minLength(1))),
    CUSTOMER_KEYS_KMS_KEY: z.optional(z.string().check(z.minLength(1))),
  })
  .check(
    z.refine(
      (e) => (e.CUSTOMER_KEYS_TABLE === undefined) === (e.CUSTOMER_KEYS_KMS_KEY === undefined),
      {
        message: "CUSTOMER_KEYS_TABLE and CUSTOMER_KEYS_KMS_KEY go together",
      },
    ),
  );

/**
 * The function's vault (functions/core/personal-data/vault.ts) when the stack gave it the
 * customers' keys: the event store then seals the personal fields it stores and opens those it
 * reads. A function the stack gave none (it touches no personal type) gets none.
 */
export function vaultOf(
  env: Readonly<Record<string, string | undefined>>,
  clients: { readonly dynamodb: AwsClient; readonly kms: AwsClient },
  clock?: Clock,
): Vault | undefined {
  const parsed = parseEnv(VaultEnv, env, "customer keys");
  if (!parsed.CUSTOMER_KEYS_TABLE || !parsed.CUSTOMER_KEYS_KMS_KEY) return undefined;
  return new Vault({
    keys: new DynamoCustomerKeys({
      client: clients.dynamodb,
      tableName: parsed.CUSTOMER_KEYS_TABLE,
    }),
    wrapping: kmsKeyWrapping(clients.kms, parsed.CUSTOMER_KEYS_KMS_KEY),
    ...(clock ? { now: () => clock.now() } : {}),
  });
}
