import { DeterministicLocalModel } from "../../adapters/local-model";
import { defineIntegration } from "../../core/integration";
import type { ModelPort } from "../../core/model";
import { GuardedModel } from "../../core/model-guard";

/**
 * A language model (functions/core/model.ts): the port a role's decision calls for an answer.
 * Deployed, Bedrock's Converse API with the model the stack sets (./aws.ts, ./infra.ts); its twin
 * is the DeterministicLocalModel, a scripted stand-in that is NOT a model (the same answers for
 * the same request). Its answers change from call to call, so a role that calls it is not a fold
 * of its streams: rebuild and check refuse it.
 */
export const model = /* @__PURE__ */ defineIntegration<ModelPort>({
  name: "model",
  access: "read",
  does: "calls a model",
  defaults: undefined,
  memory: () => new DeterministicLocalModel(),
  // Every model port a role gets, the twin and a stand-in too, spends the run's and the tenant's
  // budgets and halts when an operator stops them.
  guard: (port, controls) => new GuardedModel(port, controls),
  notes:
    "The model id comes from -c agentbus:modelId (lib/infra/constructs/model-access.ts); a model Bedrock lists as Legacy synthesizes with a warning.",
});
