import { App, Stack } from "aws-cdk-lib";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_MODEL_ID,
  MODEL_ID_CONTEXT_KEY,
  MODEL_PROVIDER_CONTEXT_KEY,
  resolveModelSetting,
} from "../../lib/constructs/model-access";
import { topology } from "../../lib/topology";
import { CONTENT_ROLES } from "../../schemas/events/workflow";
import { functionsOfKind, type Resource, statementsOf, synthesizeStack } from "./support";

/**
 * The model callers' access (the content agents and reply generation): each one's consumer gets
 * MODEL_PROVIDER / MODEL_ID and, on Bedrock, `bedrock:InvokeModel` on exactly that foundation
 * model; nothing else calls a model.
 */
const MODEL_GROUPS: string[] = [...CONTENT_ROLES, "reply-generation"];
const consumers = (context: Record<string, unknown> = {}) =>
  functionsOfKind(synthesizeStack({}, "AgentBus-test", context).template, "consumer");
const groupOf = (fn: Resource) => fn.Metadata["agentbus:group"] as string;
const envOf = (fn: Resource) =>
  ((fn.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ??
    {}) as Record<string, unknown>;

const modelArn = (modelId: string) => ({
  "Fn::Join": [
    "",
    [
      "arn:",
      { Ref: "AWS::Partition" },
      ":bedrock:",
      { Ref: "AWS::Region" },
      `::foundation-model/${modelId}`,
    ],
  ],
});

describe("model access of the agents that call a model", () => {
  it("declares the orchestrator and the four content agents as FIFO groups", () => {
    const fifo = topology.groups.filter((g) => g.ordering === "fifo").map((g) => g.name);
    expect(fifo).toEqual(expect.arrayContaining(["orchestrator", ...CONTENT_ROLES]));
  });

  it("Bedrock by default: the default model id, InvokeModel on that model only", () => {
    const template = synthesizeStack().template;
    const all = functionsOfKind(template, "consumer");
    const agents = all.filter((fn) => MODEL_GROUPS.includes(groupOf(fn)));
    expect(agents.map(groupOf).sort()).toEqual([...MODEL_GROUPS].sort());
    for (const fn of agents) {
      expect(envOf(fn), groupOf(fn)).toMatchObject({
        MODEL_PROVIDER: "bedrock",
        MODEL_ID: DEFAULT_MODEL_ID,
      });
      const bedrock = statementsOf(template, fn).filter((s) =>
        s.Action.some((a) => a.startsWith("bedrock:")),
      );
      expect(
        bedrock.map((s) => [s.Action, s.Resource]),
        groupOf(fn),
      ).toEqual([[["bedrock:InvokeModel"], [modelArn(DEFAULT_MODEL_ID)]]]);
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
    expect(review && envOf(review)).toMatchObject({ MODEL_PROVIDER: "bedrock", MODEL_ID: modelId });
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

  it("refuses a model id that is not a foundation model id, naming it", () => {
    const stack = new Stack(new App({ context: { [MODEL_ID_CONTEXT_KEY]: "anthropic.*" } }), "S");
    expect(() => resolveModelSetting(stack)).toThrow(/model id "anthropic\.\*"/);
    expect(() => resolveModelSetting(stack, { provider: "bedrock", modelId: "" })).toThrow(
      /model id ""/,
    );
  });
});
