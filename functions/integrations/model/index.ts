import {
  DeterministicLocalModel,
  type DeterministicLocalModelProps,
  type LocalScripts,
} from "../../adapters/local-model";

export {
  LOCAL_MODEL_NAME,
  type LocalScript,
  type LocalScripts,
  type RequestFacts,
  ToolUse,
} from "../../adapters/local-model";

import { type AnyIntegrationUse, defineIntegration } from "../../core/integration";
import type { ModelPort } from "../../core/model";
import { GuardedModel } from "../../core/model-guard";

/** How a role uses the model. */
export interface ModelOptions {
  /**
   * What the local model (the DeterministicLocalModel, a scripted stand-in that is NOT a model)
   * answers this role's calls with, by the role its requests name (`metadata.role`): what the role
   * kit, the simulation, the local runtime and `MODEL_PROVIDER=local` answer it with. Bedrock
   * never reads them. @default none: on the local model its calls fail `model.no_script`
   */
  readonly localScripts?: LocalScripts;
}

/**
 * A language model (functions/core/model.ts): the port a role's decision calls for an answer.
 * Deployed, Bedrock's Converse API with the model the stack sets (./aws.ts, ./infra.ts); its twin
 * is the DeterministicLocalModel, a scripted stand-in that is NOT a model (the same answers for
 * the same request), which answers each role with the scripts its use gives
 * (`use(model, { localScripts })`). Its answers change from call to call, so a role that calls it
 * is not a fold of its streams: rebuild and check refuse it.
 */
export const model = /* @__PURE__ */ defineIntegration<ModelPort, ModelOptions>({
  name: "model",
  access: "read",
  does: "calls a model",
  defaults: {},
  memory: () => new DeterministicLocalModel(),
  // One twin serves every role of a kit: each role's use registers its scripts with it.
  twinFor: (twin, options) =>
    twin instanceof DeterministicLocalModel ? twin.register(options.localScripts ?? {}) : twin,
  // Every model port a role gets, the twin and a stand-in too, spends the run's and the tenant's
  // budgets and halts when an operator stops them.
  guard: (port, controls) => new GuardedModel(port, controls),
  notes:
    "The model id comes from -c agentbus:modelId (lib/infra/constructs/model-access.ts); a model Bedrock lists as Legacy synthesizes with a warning.",
});

/**
 * The local model with the scripts of every use of the model among `uses` (a stack's groups', a
 * set of role modules'): what the local runtime answers the stack's agents with. `props.scripts`
 * (a test's own) replace those of the same roles.
 */
export function localModelOf(
  uses: Iterable<AnyIntegrationUse>,
  props: DeterministicLocalModelProps = {},
): DeterministicLocalModel {
  const local = new DeterministicLocalModel(props);
  const given = new Set(Object.keys(props.scripts ?? {}));
  for (const use of uses) {
    if (use.integration !== model) continue;
    const scripts = (use.options as ModelOptions).localScripts ?? {};
    local.register(
      Object.fromEntries(Object.entries(scripts).filter(([role]) => !given.has(role))),
    );
  }
  return local;
}
