import { Annotations, Aws, Stack, Validations } from "aws-cdk-lib";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import type { Construct } from "constructs";
import { retiringModelWarning, supportsStructuredOutput } from "./model-lifecycle";

/**
 * Which language model a consumer group's agents call, and the access that needs.
 *
 * - `bedrock` (default): the consumer gets `MODEL_PROVIDER=bedrock` and `MODEL_ID`, and its role
 *   may call `bedrock:InvokeModel` (which also authorizes the Converse API) on that model only:
 *   - a foundation model id (`anthropic.claude-...`): the foundation model in the stack's Region;
 *   - a cross-Region inference profile id (`global.…`, `us.…`, `eu.…`, ...): the profile, and
 *     the foundation model it routes to only when called through that profile (condition
 *     `bedrock:InferenceProfileArn`), in the Regions it routes to: a geographic profile's
 *     destination Regions are Bedrock's to choose and grow, so the model's ARN names every
 *     Region; a global profile's are every commercial Region, which IAM sees as the regionless
 *     model ARN (`aws:RequestedRegion` "unspecified") beside the source Region's.
 *   No wildcard action, no other model.
 * - `local`: `MODEL_PROVIDER=local`, the DeterministicLocalModel (a scripted stand-in, for the
 *   local runtime and tests); no grant.
 *
 * The model id comes from the CDK context `agentbus:modelId` (`-c agentbus:modelId=...`), else
 * DEFAULT_MODEL_ID. `agentbus:modelProvider=local` selects the local stand-in. A model that
 * Bedrock lists as Legacy or past end of life synthesizes with a warning (./model-lifecycle).
 */
export type ModelSetting =
  | { readonly provider: "bedrock"; readonly modelId: string }
  | { readonly provider: "local" };

export const MODEL_ID_CONTEXT_KEY = "agentbus:modelId";
export const MODEL_PROVIDER_CONTEXT_KEY = "agentbus:modelProvider";
/**
 * Claude Haiku 4.5 through Bedrock's global inference profile. Haiku is fast and cheap enough
 * for the agents' short structured answers, and Active on Bedrock (launched 2025-10-16); current
 * Anthropic models are served through inference profiles, and the global one is callable from
 * every commercial Region a stack may be deployed to (a `us.` profile is not, from eu-west-1), at
 * a lower token price than a geographic one. A team whose data must stay in one geography sets a
 * geographic profile, e.g. `-c agentbus:modelId=eu.anthropic.claude-haiku-4-5-20251001-v1:0`.
 */
export const DEFAULT_MODEL_ID = "global.anthropic.claude-haiku-4-5-20251001-v1:0";

/** The prefixes of Bedrock's system-defined cross-Region inference profiles. */
export const INFERENCE_PROFILE_PREFIXES = [
  "global",
  "us",
  "us-gov",
  "eu",
  "apac",
  "jp",
  "au",
  "ca",
] as const;

/** A foundation model id: provider.name[-version][:n] (no ARN, no wildcard). */
const FOUNDATION_MODEL_ID = /^[a-z0-9-]+\.[A-Za-z0-9._-]+(:[0-9]+)?$/;

/** A configured model id taken apart: the inference profile (if any) and the foundation model. */
export interface ModelReference {
  readonly profile?: { readonly id: string; readonly scope: string };
  readonly foundationModelId: string;
}

/** `modelId` as a foundation model id or an inference profile id, or undefined if it is neither. */
export function parseModelId(modelId: string): ModelReference | undefined {
  if (typeof modelId !== "string") return undefined;
  const dot = modelId.indexOf(".");
  const scope = modelId.slice(0, dot);
  if ((INFERENCE_PROFILE_PREFIXES as readonly string[]).includes(scope)) {
    const foundationModelId = modelId.slice(dot + 1);
    if (!FOUNDATION_MODEL_ID.test(foundationModelId)) return undefined;
    return { profile: { id: modelId, scope }, foundationModelId };
  }
  return FOUNDATION_MODEL_ID.test(modelId) ? { foundationModelId: modelId } : undefined;
}

/** Why `setting` is not usable, if it is not. */
export function modelSettingProblem(setting: ModelSetting): string | undefined {
  if (setting.provider === "local") return undefined;
  if (setting.provider !== "bedrock")
    return `model provider ${JSON.stringify((setting as { provider: unknown }).provider)} must be "bedrock" or "local"`;
  if (!parseModelId(setting.modelId))
    return `model id ${JSON.stringify(setting.modelId)} must be a Bedrock foundation model id (anthropic.claude-haiku-4-5-20251001-v1:0) or a cross-Region inference profile id (${INFERENCE_PROFILE_PREFIXES.join(", ")} before it, e.g. ${DEFAULT_MODEL_ID})`;
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
  warnIfRetiring(scope, setting);
  return setting;
}

/** A synth-time warning on the stack (once) when Bedrock lists the model as Legacy or past EOL. */
function warnIfRetiring(scope: Construct, setting: ModelSetting): void {
  if (setting.provider !== "bedrock") return;
  const model = parseModelId(setting.modelId);
  const warning = model && retiringModelWarning(model.foundationModelId);
  if (warning) Annotations.of(Stack.of(scope)).addWarningV2("agentbus:model-lifecycle", warning);
}

/**
 * The consumer's environment for a model setting. `MODEL_STRUCTURED_OUTPUT` says whether the
 * model enforces an answer's JSON schema (./model-lifecycle lists the families that do).
 */
export function modelEnvironment(setting: ModelSetting): Record<string, string> {
  if (setting.provider === "local") return { MODEL_PROVIDER: "local" };
  const model = parseModelId(setting.modelId);
  const structured = model !== undefined && supportsStructuredOutput(model.foundationModelId);
  return {
    MODEL_PROVIDER: "bedrock",
    MODEL_ID: setting.modelId,
    MODEL_STRUCTURED_OUTPUT: String(structured),
  };
}

/** The ARN of one foundation model in the stack's partition and `region` (the stack's by default). */
export function foundationModelArn(modelId: string, region: string = Aws.REGION): string {
  return `arn:${Aws.PARTITION}:bedrock:${region}::foundation-model/${modelId}`;
}

/** The ARN of a system-defined inference profile as the stack's account sees it in its Region. */
export function inferenceProfileArn(profileId: string): string {
  return `arn:${Aws.PARTITION}:bedrock:${Aws.REGION}:${Aws.ACCOUNT_ID}:inference-profile/${profileId}`;
}

/** The statements that let a role call `modelId` (a foundation model or an inference profile). */
export function modelAccessStatements(modelId: string): PolicyStatement[] {
  const model = parseModelId(modelId);
  if (!model) throw new Error(modelSettingProblem({ provider: "bedrock", modelId }));
  const actions = ["bedrock:InvokeModel"];
  if (!model.profile)
    return [new PolicyStatement({ actions, resources: [foundationModelArn(modelId)] })];
  const profile = inferenceProfileArn(model.profile.id);
  const throughProfile = { "bedrock:InferenceProfileArn": profile };
  const statements = [new PolicyStatement({ actions, resources: [profile] })];
  if (model.profile.scope === "global") {
    statements.push(
      new PolicyStatement({
        actions,
        resources: [foundationModelArn(model.foundationModelId)],
        conditions: { StringEquals: throughProfile },
      }),
      new PolicyStatement({
        actions,
        resources: [foundationModelArn(model.foundationModelId, "")],
        conditions: { StringEquals: { ...throughProfile, "aws:RequestedRegion": "unspecified" } },
      }),
    );
  } else {
    statements.push(
      new PolicyStatement({
        actions,
        resources: [foundationModelArn(model.foundationModelId, "*")],
        conditions: { StringEquals: throughProfile },
      }),
    );
  }
  return statements;
}

/** Set the model environment on `fn` and, for Bedrock, grant InvokeModel on that model only. */
export function grantModelAccess(
  fn: IFunction & { addEnvironment(key: string, value: string): unknown },
  setting: ModelSetting,
): void {
  for (const [key, value] of Object.entries(modelEnvironment(setting)))
    fn.addEnvironment(key, value);
  if (setting.provider !== "bedrock") return;
  for (const statement of modelAccessStatements(setting.modelId)) fn.addToRolePolicy(statement);
  const model = parseModelId(setting.modelId);
  const policy = fn.role?.node.tryFindChild("DefaultPolicy");
  if (model?.profile && model.profile.scope !== "global" && policy)
    Validations.of(policy).acknowledge({
      id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/${model.foundationModelId}]`,
      reason: `The inference profile ${model.profile.id} routes to ${model.foundationModelId} in Regions Bedrock chooses and adds to; the model is granted in any Region only when called through that profile (condition bedrock:InferenceProfileArn)`,
    });
}
