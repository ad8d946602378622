import { DynamoSideEffects } from "../../adapters/dynamodb/side-effects";
import { parseEnv } from "../../core/parse-env";
import { ConsumerEnv } from "../../handlers/env";
import { defineAdapter } from "../../handlers/integration-adapter";
import { sideEffects } from "./index";

/** The side-effects table every consumer has (`SIDE_EFFECTS_TABLE`). */
export const sideEffectsAdapter = /* @__PURE__ */ defineAdapter(
  sideEffects,
  ({ env, group, client }) => {
    const { SIDE_EFFECTS_TABLE } = parseEnv(ConsumerEnv, env, group);
    if (!SIDE_EFFECTS_TABLE)
      throw new Error(
        `${group}: the side-effect ledger needs SIDE_EFFECTS_TABLE in its environment`,
      );
    return new DynamoSideEffects({ client: client("dynamodb"), tableName: SIDE_EFFECTS_TABLE });
  },
);
