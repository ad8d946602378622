import { App, Stack } from "aws-cdk-lib";
import { Annotations, Match } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { CONTENT_ROLES } from "../../functions/roles/content-agents/events";
import {
  DEFAULT_MODEL_ID,
  MODEL_ID_CONTEXT_KEY,
  MODEL_PROVIDER_CONTEXT_KEY,
  modelAccessStatements,
  parseModelId,
  resolveModelSetting,
} from "../../lib/infra/constructs/model-access";
import { RETIRING_MODELS } from "../../lib/infra/constructs/model-lifecycle";
import { topology } from "../../lib/infra/project";
import { functionsOfKind, type Resource, statementsOf, synthesizeStack } from "./synth";

/**
 * The model callers' access (the content agents and reply generation): each one's consumer gets
 * MODEL_PROVIDER / MODEL_ID and, on Bedrock, `bedrock:InvokeModel` on exactly that foundation
 * model; nothing else calls a model.
 */
const MODEL_GROUPS: string[] = [...CONTENT_ROLES, "reply-generation", "refund-review"];
const consumers = (context: Record<string, unknown> = {}) =>
  functionsOfKind(synthesizeStack({}, "AgentBus-test", context).template, "consumer");
const groupOf = (fn: Resource) => fn.Metadata["agentbus:group"] as string;
const envOf = (fn: Resource) =>
  ((fn.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ??
    {}) as Record<string, unknown>;

/** An ARN intrinsic as text, with the stack's pseudo parameters named. */
function arnText(value: unknown): string {
  if (typeof value === "string") return value;
  const join = (value as { "Fn::Join": [string, unknown[]] })["Fn::Join"];
  return join[1]
    .map((part) =>
      typeof part === "string" ? part : `<${(part as { Ref: string }).Ref.replace("AWS::", "")}>`,
    )
    .join("");
}

interface ModelStatement {
  readonly actions: string[];
  readonly resources: string[];
  readonly conditions?: unknown;
}

/** The bedrock statements of a function's role, ARNs as text, with their conditions. */
function bedrockStatements(template: ReturnType<typeof synthesizeStack>["template"], fn: Resource) {
  const roleId = (fn.Properties.Role as { "Fn::GetAtt": [string] })["Fn::GetAtt"][0];
  return Object.values(template.findResources("AWS::IAM::Policy"))
    .filter((p) => JSON.stringify(p.Properties.Roles).includes(`"${roleId}"`))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Record<string, unknown>[])
    .filter((s) => JSON.stringify(s.Action).includes("bedrock:"))
    .map(
      (s): ModelStatement => ({
        actions: ([] as string[]).concat(s.Action as string),
        resources: ([] as unknown[]).concat(s.Resource).map(arnText),
        ...(s.Condition ? { conditions: s.Condition } : {}),
      }),
    );
}

const PROFILE_ARN = "arn:<Partition>:bedrock:<Region>:<AccountId>:inference-profile/";
const HAIKU = "anthropic.claude-haiku-4-5-20251001-v1:0";

/** What a global inference profile needs: the profile, and its model through it only. */
const globalProfileAccess = (profileId: string, modelId: string): ModelStatement[] => {
  const through = { "bedrock:InferenceProfileArn": expect.anything() };
  return [
    { actions: ["bedrock:InvokeModel"], resources: [`${PROFILE_ARN}${profileId}`] },
    {
      actions: ["bedrock:InvokeModel"],
      resources: [`arn:<Partition>:bedrock:<Region>::foundation-model/${modelId}`],
      conditions: { StringEquals: through },
    },
    {
      actions: ["bedrock:InvokeModel"],
      resources: [`arn:<Partition>:bedrock:::foundation-model/${modelId}`],
      conditions: { StringEquals: { ...through, "aws:RequestedRegion": "unspecified" } },
    },
  ];
};

describe("model access of the agents that call a model", () => {
  it("declares the orchestrator and the four content agents as FIFO groups", () => {
    const fifo = topology.groups.filter((g) => g.ordering === "fifo").map((g) => g.name);
    expect(fifo).toEqual(expect.arrayContaining(["orchestrator", ...CONTENT_ROLES]));
  });

  it("Bedrock by default: Claude Haiku 4.5 through the global inference profile, Active on Bedrock", () => {
    expect(DEFAULT_MODEL_ID).toBe(`global.${HAIKU}`);
    expect(RETIRING_MODELS[HAIKU]).toBeUndefined();
  });

  it("Bedrock by default: the default model id, InvokeModel on that profile and its model only", () => {
    const template = synthesizeStack().template;
    const all = functionsOfKind(template, "consumer");
    const agents = all.filter((fn) => MODEL_GROUPS.includes(groupOf(fn)));
    expect(agents.map(groupOf).sort()).toEqual([...MODEL_GROUPS].sort());
    for (const fn of agents) {
      expect(envOf(fn), groupOf(fn)).toMatchObject({
        MODEL_PROVIDER: "bedrock",
        MODEL_ID: DEFAULT_MODEL_ID,
        // Claude Haiku 4.5 enforces an answer's JSON schema (structured output).
        MODEL_STRUCTURED_OUTPUT: "true",
      });
      expect(bedrockStatements(template, fn), groupOf(fn)).toEqual(
        globalProfileAccess(DEFAULT_MODEL_ID, HAIKU),
      );
    }
    for (const fn of all.filter((f) => !agents.includes(f))) {
      expect(envOf(fn).MODEL_PROVIDER, groupOf(fn)).toBeUndefined();
      const bedrock = statementsOf(template, fn).filter((s) =>
        s.Action.some((a) => a.startsWith("bedrock:")),
      );
      expect(bedrock, groupOf(fn)).toEqual([]);
    }
  });

  it(`takes the model id from the context ${MODEL_ID_CONTEXT_KEY}`, () => {
    const modelId = "anthropic.claude-3-haiku-20240307-v1:0";
    const review = consumers({ [MODEL_ID_CONTEXT_KEY]: modelId }).find(
      (fn) => groupOf(fn) === "review",
    );
    // Claude 3 Haiku has no structured output: the consumer leaves outputConfig out.
    expect(review && envOf(review)).toMatchObject({
      MODEL_PROVIDER: "bedrock",
      MODEL_ID: modelId,
      MODEL_STRUCTURED_OUTPUT: "false",
    });
  });

  it(`${MODEL_PROVIDER_CONTEXT_KEY}=local: the local stand-in and no grant`, () => {
    const { template } = synthesizeStack({}, "AgentBus-test", {
      [MODEL_PROVIDER_CONTEXT_KEY]: "local",
    });
    for (const fn of functionsOfKind(template, "consumer").filter((f) =>
      MODEL_GROUPS.includes(groupOf(f)),
    )) {
      expect(envOf(fn).MODEL_PROVIDER).toBe("local");
      expect(envOf(fn).MODEL_ID).toBeUndefined();
      expect(
        statementsOf(template, fn).filter((s) => s.Action.some((a) => a.startsWith("bedrock:"))),
      ).toEqual([]);
    }
  });

  it("refuses a model id that is neither a foundation model nor an inference profile id, naming it", () => {
    const stack = new Stack(new App({ context: { [MODEL_ID_CONTEXT_KEY]: "anthropic.*" } }), "S");
    expect(() => resolveModelSetting(stack)).toThrow(/model id "anthropic\.\*"/);
    for (const bad of ["", "global.", "global.anthropic", "global.anthropic.*", "arn:aws:x"])
      expect(() => resolveModelSetting(stack, { provider: "bedrock", modelId: bad }), bad).toThrow(
        `model id ${JSON.stringify(bad)}`,
      );
  });

  it("tells a foundation model id from an inference profile id", () => {
    expect(parseModelId(HAIKU)).toEqual({ foundationModelId: HAIKU });
    expect(parseModelId(`eu.${HAIKU}`)).toEqual({
      profile: { id: `eu.${HAIKU}`, scope: "eu" },
      foundationModelId: HAIKU,
    });
    expect(parseModelId(`us-gov.${HAIKU}`)?.profile?.scope).toBe("us-gov");
    expect(parseModelId("amazon.nova-lite-v1:0")).toEqual({
      foundationModelId: "amazon.nova-lite-v1:0",
    });
  });
});

describe("the grant for each kind of model id", () => {
  const grantOf = (modelId: string) => {
    const { template } = synthesizeStack({}, "AgentBus-test", { [MODEL_ID_CONTEXT_KEY]: modelId });
    const review = functionsOfKind(template, "consumer").find((fn) => groupOf(fn) === "review");
    if (!review) throw new Error("no review consumer");
    expect(envOf(review).MODEL_ID).toBe(modelId);
    return bedrockStatements(template, review);
  };

  it("a foundation model id: that model in the stack's Region, nothing else", () => {
    expect(grantOf(HAIKU)).toEqual([
      {
        actions: ["bedrock:InvokeModel"],
        resources: [`arn:<Partition>:bedrock:<Region>::foundation-model/${HAIKU}`],
      },
    ]);
  });

  it("a geographic profile id: the profile, and its model in any Region only through it", () => {
    const profile = `eu.${HAIKU}`;
    const statements = grantOf(profile);
    expect(statements).toEqual([
      { actions: ["bedrock:InvokeModel"], resources: [`${PROFILE_ARN}${profile}`] },
      {
        actions: ["bedrock:InvokeModel"],
        resources: [`arn:<Partition>:bedrock:*::foundation-model/${HAIKU}`],
        conditions: { StringEquals: { "bedrock:InferenceProfileArn": expect.anything() } },
      },
    ]);
    const conditions = statements[1]?.conditions as { StringEquals: Record<string, unknown> };
    const condition = conditions.StringEquals["bedrock:InferenceProfileArn"];
    expect(arnText(condition)).toBe(`${PROFILE_ARN}${profile}`);
  });

  it("a global profile id: the profile, its model in the source Region and the regionless ARN, through it", () => {
    const profile = `global.${HAIKU}`;
    const statements = grantOf(profile);
    expect(statements).toEqual(globalProfileAccess(profile, HAIKU));
    for (const s of statements.slice(1)) {
      const through = (s.conditions as { StringEquals: Record<string, unknown> }).StringEquals;
      expect(arnText(through["bedrock:InferenceProfileArn"])).toBe(`${PROFILE_ARN}${profile}`);
    }
  });

  it("builds the same statements the stack grants", () => {
    const stack = new Stack();
    const rendered = modelAccessStatements(`us.${HAIKU}`).map((s) => stack.resolve(s.toJSON()));
    expect(rendered).toHaveLength(2);
    expect(JSON.stringify(rendered)).toContain(`inference-profile/us.${HAIKU}`);
  });
});

describe("a model Bedrock lists as Legacy or past end of life", () => {
  const warningsOf = (modelId: string) => {
    const { stack } = synthesizeStack({}, "AgentBus-test", { [MODEL_ID_CONTEXT_KEY]: modelId });
    return Annotations.fromStack(stack).findWarning("*", Match.stringLikeRegexp("model .*"));
  };

  it("warns once at synth, naming the model, its state, the date and an Active replacement", () => {
    const retired = "anthropic.claude-3-5-haiku-20241022-v1:0";
    const warnings = warningsOf(retired);
    expect(warnings).toHaveLength(1);
    const text = String(warnings[0]?.entry.data);
    expect(text).toContain(`model ${retired} reached end of life on Amazon Bedrock on 2026-06-19`);
    expect(text).toContain(`agentbus:modelId=global.${HAIKU}`);
  });

  it("warns for a Legacy model behind an inference profile too", () => {
    const text = String(warningsOf("us.anthropic.claude-3-haiku-20240307-v1:0")[0]?.entry.data);
    expect(text).toContain("is Legacy on Amazon Bedrock and reaches end of life on 2026-09-10");
  });

  it("says nothing for the default (Active) model", () => {
    expect(warningsOf(DEFAULT_MODEL_ID)).toEqual([]);
  });
});
