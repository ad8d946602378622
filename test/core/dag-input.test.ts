import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { WorkflowDefinitionError } from "../../functions/core/dag/errors";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { RunInputSpecSchema, runInputProblems } from "../../functions/core/dag/input";
import { workflowDefinitionJsonSchema } from "../../functions/core/dag/json-schema";
import { quickNews } from "../../functions/roles/content-agents/workflows";

/**
 * A workflow's declared run input: checked with the definition (every inconsistency named), and
 * every start's input checked against it, every problem named at once.
 */

const spec = RunInputSpecSchema.parse({
  type: "object",
  properties: {
    subject: { type: "string", minLength: 2, maxLength: 5 },
    count: { type: "integer", minimum: 1, maximum: 3 },
    ratio: { type: "number", maximum: 1 },
    tone: { type: "string", enum: ["plain", "formal"] },
    draft: { type: "boolean" },
  },
  required: ["subject", "count"],
});

const definitionWith = (input: unknown) => ({
  name: "summary",
  version: 1,
  nodes: [{ id: "a", role: "tally" }],
  input,
});

describe("runInputProblems", () => {
  it("takes an input that fits, with properties it does not declare", () => {
    expect(runInputProblems(spec, { subject: "tide", count: 2, other: [1] })).toEqual([]);
    expect(runInputProblems(spec, { subject: "tide", count: 3, ratio: 0.5, draft: false })).toEqual(
      [],
    );
  });

  it("names every problem at once", () => {
    expect(
      runInputProblems(spec, { subject: "a", count: 1.5, ratio: "x", tone: "loud", draft: "yes" }),
    ).toEqual([
      'subject: must be at least 2 characters (got "a")',
      "count: must be an integer (got 1.5)",
      'ratio: must be a number (got "x")',
      'tone: must be one of "plain", "formal" (got "loud")',
      'draft: must be true or false (got "yes")',
    ]);
    expect(runInputProblems(spec, {})).toEqual(["subject: required", "count: required"]);
  });

  it("refuses what is not a JSON object, declared input or none", () => {
    for (const notObject of [null, [1], "x", 3])
      for (const s of [spec, undefined])
        expect(runInputProblems(s, notObject)[0]).toMatch(/^\(input\): must be a JSON object/);
    expect(runInputProblems(undefined, { anything: { at: "all" } })).toEqual([]);
  });

  it("refuses undeclared properties when additionalProperties is false", () => {
    const closed = RunInputSpecSchema.parse({
      type: "object",
      properties: { a: { type: "string" } },
      additionalProperties: false,
    });
    expect(runInputProblems(closed, { a: "x", b: 1 })).toEqual([
      "b: not a property of this workflow's input (properties: a)",
    ]);
  });

  it("takes every integer within the bounds and refuses every one outside (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: -1000, max: 1000 }), (count) => {
        const problems = runInputProblems(spec, { subject: "tide", count });
        expect(problems.length === 0).toBe(count >= 1 && count <= 3);
      }),
    );
  });
});

describe("a definition's declared input", () => {
  it("is checked with the definition, every inconsistency named", () => {
    const bad = definitionWith({
      type: "object",
      properties: {
        n: { type: "boolean", minimum: 1 },
        s: { type: "string", minLength: 4, maxLength: 2, enum: ["toolong", "ok"] },
        k: { type: "integer", default: "x" },
      },
      required: ["missing"],
    });
    let error: unknown;
    try {
      defineWorkflow(bad as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    const message = (error as Error).message;
    expect(message).toContain("minimum and maximum bound a number, not a boolean");
    expect(message).toContain("minLength 4 is above maxLength 2");
    expect(message).toContain('enum value "toolong" must be at most 2 characters');
    expect(message).toContain('default "x" must be an integer');
    expect(message).toContain("missing is required but not among the properties (n, s, k)");
  });

  it("is declared by the content workflows: a topic hint", () => {
    expect(quickNews.input?.required).toEqual(["topic_hint"]);
    expect(runInputProblems(quickNews.input, { topic_hint: "tides" })).toEqual([]);
    expect(runInputProblems(quickNews.input, { topic_hint: "" })).toEqual([
      'topic_hint: must be at least 1 character (got "")',
    ]);
  });

  it("is in the language's JSON Schema", () => {
    const schema = workflowDefinitionJsonSchema() as {
      properties: { input: { properties: Record<string, unknown> } };
    };
    expect(Object.keys(schema.properties.input.properties)).toEqual(
      expect.arrayContaining(["type", "properties", "required", "additionalProperties"]),
    );
  });
});
