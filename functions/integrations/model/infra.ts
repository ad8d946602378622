import { defineInfra } from "../../../lib/infra/integration-infra";
import { model } from "./index";

/**
 * Each group that calls the model gets the model setting of the CDK context (`MODEL_PROVIDER`,
 * `MODEL_ID`) and, on Bedrock, `bedrock:InvokeModel` on that model only
 * (lib/infra/constructs/model-access.ts).
 */
export const modelInfra = defineInfra(model, (_scope, users) => {
  for (const { group } of users) group.callModel();
});
