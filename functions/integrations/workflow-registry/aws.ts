import { DynamoWorkflowRegistry } from "../../adapters/dynamodb/workflow-registry";
import { parseEnv } from "../../core/parse-env";
import { ConsumerEnv } from "../../handlers/env";
import { defineAdapter } from "../../handlers/integration-adapter";
import { workflowRegistry } from "./index";

/** Items of the state table every consumer has (`STATE_TABLE`). */
export const workflowRegistryAdapter = /* @__PURE__ */ defineAdapter(
  workflowRegistry,
  ({ env, group, client }) => {
    const { STATE_TABLE } = parseEnv(ConsumerEnv, env, group);
    return new DynamoWorkflowRegistry({ client: client("dynamodb"), tableName: STATE_TABLE });
  },
);
