import { DynamoContentStore } from "../../adapters/dynamodb/content";
import { DynamoSideEffects } from "../../adapters/dynamodb/side-effects";
import { parseEnv } from "../../core/parse-env";
import type { RolePorts } from "../../core/role-module";
import { ConsumerEnv } from "../env";
import type { PortWiring } from "../role-ports";

/**
 * `needs.tools`: an agent loop's conversation, kept by content hash in the state table
 * (`STATE_TABLE`), and its write tools' idempotency records in the side-effects table
 * (`SIDE_EFFECTS_TABLE`); both tables every consumer already reads and writes.
 */
export function toolPorts({
  env,
  group,
  dynamodb,
}: PortWiring): Pick<RolePorts, "content" | "sideEffects"> {
  const tables = parseEnv(ConsumerEnv, env, group);
  if (!tables.SIDE_EFFECTS_TABLE)
    throw new Error(`${group}: needs.tools needs SIDE_EFFECTS_TABLE in its environment`);
  return {
    content: new DynamoContentStore({ client: dynamodb, tableName: tables.STATE_TABLE }),
    sideEffects: new DynamoSideEffects({ client: dynamodb, tableName: tables.SIDE_EFFECTS_TABLE }),
  };
}
