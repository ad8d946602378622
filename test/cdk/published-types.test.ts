import { describe, expect, it } from "vitest";
import { packedJsonText } from "../../functions/core/packed-json";
import { UNPUBLISHED_TYPES_ENV } from "../../functions/core/relay";
import { topology } from "../../lib/infra/project";
import {
  PUBLISH_CONTEXT_KEY,
  parsePublish,
  unpublishedTypes,
} from "../../lib/infra/published-types";
import { DEFINITIONS, registry } from "../../schemas";
import * as z from "../../schemas/zod";
import { functionsOfKind, resources, synthesizeStack } from "./synth";

const { template } = synthesizeStack();

/** The relay's environment variables in a synthesized template. */
function relayVariables(synthesized: { template: typeof template }): Record<string, unknown> {
  const [relay] = functionsOfKind(synthesized.template, "relay");
  if (!relay) throw new Error("the stack has no relay");
  return (relay.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
}
const relayEnv = relayVariables({ template });

/** The relay's UNPUBLISHED_TYPES, read as the relay reads it (JSON, compressed when long). */
function unpublishedOf(variables: Record<string, unknown>): string[] {
  return packedJsonText(z.array(z.string()), "types").parse(variables[UNPUBLISHED_TYPES_ENV]);
}

/** The types a rule of the template takes from what the relay publishes (stored events). */
function typesRulesTake(): Set<string> {
  const taken = new Set<string>();
  for (const rule of resources(template, "AWS::Events::Rule")) {
    const pattern = rule.Properties.EventPattern as
      | {
          source?: unknown;
          "detail-type"?: string[];
          detail?: { aggregate?: { version?: number[] } };
        }
      | undefined;
    // The group that keeps messages matches version 0 only: no stored event. A relay-delivered
    // group's rule leaves the relay's events out: the relay sends them to its queue itself.
    if (!pattern?.["detail-type"] || pattern.detail?.aggregate?.version?.includes(0)) continue;
    if (JSON.stringify(pattern.source).includes("anything-but")) continue;
    for (const type of pattern["detail-type"]) taken.add(type);
  }
  return taken;
}

describe("the types the relay leaves unpublished", () => {
  it("are, in the reference stack, exactly the stored types no rule of its template takes", () => {
    const unpublished = unpublishedOf(relayEnv);
    const taken = typesRulesTake();
    expect(unpublished.length).toBeGreaterThan(0);
    for (const type of unpublished) {
      expect(registry.find(type)?.sequenced, type).toBe(true);
      expect(taken.has(type), type).toBe(false);
    }
    const storedHubTypes = DEFINITIONS.filter((d) => d.sequenced).map((d) => d.type);
    for (const type of storedHubTypes)
      expect(taken.has(type) || unpublished.includes(type), type).toBe(true);
  });

  it("leave out what `publish` names, and none with `all`", () => {
    const all = unpublishedTypes(topology);
    expect(all).toContain("workflow.completed");
    const named = unpublishedTypes(topology, ["workflow.completed", "reply.generated"]);
    expect(named).toEqual(all.filter((t) => t !== "workflow.completed" && t !== "reply.generated"));
    expect(unpublishedTypes(topology, "all")).toEqual([]);
  });

  it("follow the stack's `publish`, else the context's `agentbus:publish`", () => {
    const named = relayVariables(synthesizeStack({ publish: ["workflow.completed"] }));
    const left = unpublishedOf(named);
    expect(left).toEqual(unpublishedTypes(topology).filter((t) => t !== "workflow.completed"));
    const all = synthesizeStack({}, "AgentBus-test", { [PUBLISH_CONTEXT_KEY]: "all" });
    expect(relayVariables(all)).not.toHaveProperty(UNPUBLISHED_TYPES_ENV);
  });

  it("refuse a `publish` naming a type that is not registered, naming it", () => {
    expect(() => unpublishedTypes(topology, ["workflow.completed", "no.such.type"])).toThrow(
      /not registered: no\.such\.type/,
    );
  });

  it("read `agentbus:publish` from the context: all, or a comma list", () => {
    expect(parsePublish(undefined)).toBeUndefined();
    expect(parsePublish("all")).toBe("all");
    expect(parsePublish(" workflow.completed, reply.generated ,")).toEqual([
      "workflow.completed",
      "reply.generated",
    ]);
  });
});
