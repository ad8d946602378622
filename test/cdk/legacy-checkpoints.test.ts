import { describe, expect, it } from "vitest";
import { LEGACY_CHECKPOINTS_KEY } from "../../lib/infra/agentbus-stack";
import { resources, synthesizeStack } from "./synth";

/**
 * `agentbus:legacyCheckpoints`: while a stack deployed before checkpoints moved onto the state
 * items upgrades, every consumer reads the old rows too; otherwise none does.
 */
const consumersOf = (context: Record<string, unknown>) => {
  const { template } = synthesizeStack({}, "AgentBus-legacy", context);
  return resources(template, "AWS::Lambda::Function", (r) => {
    const env = (r.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
      ?.Variables;
    return env !== undefined && "STATE_TABLE" in env && "DEAD_LETTER_QUEUE_URL" in env;
  }).map((r) => (r.Properties.Environment as { Variables: Record<string, unknown> }).Variables);
};

describe("legacy checkpoints while a stack upgrades", () => {
  it("sets LEGACY_CHECKPOINTS on every consumer only when the context asks for it", () => {
    const plain = consumersOf({});
    expect(plain.length).toBeGreaterThan(5);
    expect(plain.filter((env) => "LEGACY_CHECKPOINTS" in env)).toEqual([]);
    const upgrading = consumersOf({ [LEGACY_CHECKPOINTS_KEY]: "true" });
    expect(upgrading).toHaveLength(plain.length);
    expect(upgrading.every((env) => env.LEGACY_CHECKPOINTS === "true")).toBe(true);
  });
});
