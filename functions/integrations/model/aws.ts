import * as z from "../../../schemas/zod";
import { BedrockModel } from "../../adapters/bedrock/model";
import { DeterministicLocalModel } from "../../adapters/local-model";
import { parseEnv } from "../../core/parse-env";
import { defineAdapter } from "../../handlers/integration-adapter";
import { model } from "./index";

/**
 * `MODEL_PROVIDER=bedrock` (the default; what deployed stacks set): Bedrock Converse with
 * `MODEL_ID` (required), and structured output when `MODEL_STRUCTURED_OUTPUT=true` (the stack
 * sets it from the model catalog); `MODEL_PROVIDER=local`: the DeterministicLocalModel, a
 * scripted stand-in that is NOT a model (no AWS, no network, same answers for the same request),
 * with the scripts of the role's use (`localScripts`).
 */
const ModelEnv = z.discriminatedUnion("MODEL_PROVIDER", [
  z.object({
    MODEL_PROVIDER: z.literal("bedrock"),
    MODEL_ID: z.string().check(z.trim(), z.minLength(1)),
    MODEL_STRUCTURED_OUTPUT: z._default(z.enum(["true", "false"]), "false"),
  }),
  z.object({ MODEL_PROVIDER: z.literal("local"), MODEL_ID: z.optional(z.string()) }),
]);

export const modelAdapter = /* @__PURE__ */ defineAdapter(
  model,
  ({ env, group, client }, options) => {
    const parsed = parseEnv(
      ModelEnv,
      { ...env, MODEL_PROVIDER: env.MODEL_PROVIDER ?? "bedrock" },
      group,
    );
    if (parsed.MODEL_PROVIDER === "local")
      return new DeterministicLocalModel({ scripts: options.localScripts });
    return new BedrockModel({
      client: client("bedrock-runtime"),
      modelId: parsed.MODEL_ID,
      structuredOutput: parsed.MODEL_STRUCTURED_OUTPUT === "true",
    });
  },
);
