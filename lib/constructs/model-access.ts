import { Aws } from "aws-cdk-lib";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import type { Construct } from "constructs";

/**
 * Which language model a consumer group's agents call, and the access that needs.
 *
 * - `bedrock` (default): the consumer gets `MODEL_PROVIDER=bedrock` and `MODEL_ID`, and its role
 *   may call `bedrock:InvokeModel` on exactly that foundation model
 *   (`arn:<partition>:bedrock:<region>::foundation-model/<modelId>`); the Converse API is
 *   authorized by InvokeModel. No wildcard resource.
 * - `local`: `MODEL_PROVIDER=local`, the DeterministicLocalModel (a scripted stand-in, for the
 *   local runtime and tests); no grant.
 *
 * The default model id comes from the CDK context `agentbus:modelId` (`-c agentbus:modelId=...`),
 * else DEFAULT_MODEL_ID. `agentbus:modelProvider=local` selects the local stand-in.
 */
export type ModelSetting =
  | { readonly provider: "bedrock"; readonly modelId: string }
  | { readonly provider: "local" };

export const MODEL_ID_CONTEXT_KEY = "agentbus:modelId";
export const MODEL_PROVIDER_CONTEXT_KEY = "agentbus:modelProvider";
/** Claude 3.5 Haiku: fast and cheap enough for the content agents' structured answers. */
export const DEFAULT_MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0";

/**
 * The consumer handlers that call a model (the content agents and reply generation). Their groups get the model
 * setting even when the stack passes none (`ConsumerGroupProps.model`).
 */
export const MODEL_CONSUMER_ENTRIES: ReadonlySet<string> = new Set([
  "functions/handlers/topic-selection.ts",
  "functions/handlers/fact-check.ts",
  "functions/handlers/writing.ts",
  "functions/handlers/review.ts",
  "functions/handlers/reply-generation.ts",
]);

/** A foundation model id: provider.name[-version][:n] (no ARN, no wildcard, no inference profile). */
const MODEL_ID = /^[a-z0-9-]+\.[A-Za-z0-9._-]+(:[0-9]+)?$/;

/** Why `setting` is not usable, if it is not. */
export function modelSettingProblem(setting: ModelSetting): string | undefined {
  if (setting.provider === "local") return undefined;
  if (setting.provider !== "bedrock")
    return `model provider ${JSON.stringify((setting as { provider: unknown }).provider)} must be "bedrock" or "local"`;
  if (typeof setting.modelId !== "string" || !MODEL_ID.test(setting.modelId))
    return `model id ${JSON.stringify(setting.modelId)} must be a Bedrock foundation model id such as ${DEFAULT_MODEL_ID}`;
  return undefined;
}

/** The model setting from the CDK context of `scope`, or `given`; throws naming a bad value. */
export function resolveModelSetting(scope: Construct, given?: ModelSetting): ModelSetting {
  const provider = scope.node.tryGetContext(MODEL_PROVIDER_CONTEXT_KEY) ?? "bedrock";
  const fromContext: ModelSetting =
    provider === "local"
      ? { provider: "local" }
      : {
          provider,
          modelId: scope.node.tryGetContext(MODEL_ID_CONTEXT_KEY) ?? DEFAULT_MODEL_ID,
        };
  const setting = given ?? fromContext;
  const problem = modelSettingProblem(setting);
  if (problem) throw new Error(problem);
  return setting;
}

/** The consumer's environment for a model setting. */
export function modelEnvironment(setting: ModelSetting): Record<string, string> {
  return setting.provider === "local"
    ? { MODEL_PROVIDER: "local" }
    : { MODEL_PROVIDER: "bedrock", MODEL_ID: setting.modelId };
}

/** The ARN of one foundation model in the stack's partition and region. */
export function foundationModelArn(modelId: string): string {
  return `arn:${Aws.PARTITION}:bedrock:${Aws.REGION}::foundation-model/${modelId}`;
}

/** Set the model environment on `fn` and, for Bedrock, grant InvokeModel on that model only. */
export function grantModelAccess(
  fn: IFunction & { addEnvironment(key: string, value: string): unknown },
  setting: ModelSetting,
): void {
  for (const [key, value] of Object.entries(modelEnvironment(setting)))
    fn.addEnvironment(key, value);
  if (setting.provider !== "bedrock") return;
  fn.addToRolePolicy(
    new PolicyStatement({
      actions: ["bedrock:InvokeModel"],
      resources: [foundationModelArn(setting.modelId)],
    }),
  );
}
