import { describe, expect, it } from "vitest";
import { topology } from "../../lib/infra/project";
import { topologyOfOutputs } from "../../lib/operator/stack";
import { synthesizeStack } from "../cdk/synth";

describe("topologyOfOutputs", () => {
  it("finds every topic and consumer group of the stack from its output names", () => {
    const { template } = synthesizeStack();
    const outputs = Object.fromEntries(
      Object.keys(template.toJSON().Outputs as Record<string, unknown>).map((k) => [k, "x"]),
    );
    const found = topologyOfOutputs(outputs);
    expect([...found.topics].sort()).toEqual([...topology.topics].sort());
    expect(found.groups.map((g) => g.name).sort()).toEqual(
      topology.groups.map((g) => g.name).sort(),
    );
  });
});
