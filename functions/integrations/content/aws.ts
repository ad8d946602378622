import { DynamoContentStore } from "../../adapters/dynamodb/content";
import { parseEnv } from "../../core/parse-env";
import { ConsumerEnv } from "../../handlers/env";
import { defineAdapter } from "../../handlers/integration-adapter";
import { content } from "./index";

/** Items of the state table every consumer has (`STATE_TABLE`). */
export const contentAdapter = /* @__PURE__ */ defineAdapter(content, ({ env, group, client }) => {
  const { STATE_TABLE } = parseEnv(ConsumerEnv, env, group);
  return new DynamoContentStore({ client: client("dynamodb"), tableName: STATE_TABLE });
});
