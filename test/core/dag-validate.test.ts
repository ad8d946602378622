import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fromJSONSchema } from "zod";
import type { WorkflowDefinitionInput } from "../../functions/core/dag/definition";
import { WorkflowDefinitionError } from "../../functions/core/dag/errors";
import { defineWorkflow } from "../../functions/core/dag/graph";
import {
  WORKFLOW_DEFINITION_SCHEMA_FILE,
  workflowDefinitionJsonSchema,
} from "../../functions/core/dag/json-schema";
import { CONTENT_ROLES } from "../../functions/roles/content-agents/events";
import { CONTENT_WORKFLOWS } from "../../functions/roles/content-agents/workflows";

/** A definition is refused once, with every structural problem named. */

function refusal(input: WorkflowDefinitionInput, roles?: string[]): WorkflowDefinitionError {
  try {
    defineWorkflow(input, roles ? { roles } : {});
  } catch (error) {
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    return error as WorkflowDefinitionError;
  }
  throw new Error("expected a WorkflowDefinitionError");
}

const problems = (e: WorkflowDefinitionError) =>
  (e.details.problems as { code: string; message: string }[]).map((p) => p.code);

describe("defineWorkflow names every problem at once", () => {
  it("lists an unknown role, a cycle, an edge to a missing node, a map path off the graph, a quorum too large and a bad loop", () => {
    const e = refusal(
      {
        name: "broken",
        version: 1,
        nodes: [
          { id: "a", role: "writer" },
          { id: "b", role: "ghostwriter" },
          { id: "c", role: "writer" },
          { id: "d", role: "writer", map: { items: { node: "e", path: "list" } } },
          { id: "e", role: "writer" },
          { id: "j", role: "writer", join: "quorum", quorum: 3 },
        ],
        edges: [
          { from: "a", to: "b" },
          { from: "b", to: "c" },
          { from: "c", to: "b" },
          { from: "a", to: "nowhere" },
          { from: "a", to: "d" },
          { from: "a", to: "e" },
          { from: "a", to: "j" },
          { from: "e", to: "j" },
          { from: "d", to: "b", loop: { until: { path: "ok" }, maxRounds: 2 } },
        ],
      },
      ["writer"],
    );
    expect(problems(e).sort()).toEqual(
      [
        "dag.unknown_role",
        "dag.cycle",
        "dag.unknown_node",
        "dag.bad_map_path",
        "dag.bad_quorum",
        "dag.bad_loop",
      ].sort(),
    );
    expect(e.code).toBe(problems(e)[0]);
    for (const needle of [
      "ghostwriter",
      "b -> c -> b",
      "nowhere",
      "map.items reads node e",
      "quorum of 3",
      "loop edge d -> b",
    ])
      expect(e.message).toContain(needle);
  });

  it("refuses a map over the run input's field that the declared input makes a scalar or shuts out", () => {
    const declared = (additionalProperties?: boolean): WorkflowDefinitionInput => ({
      name: "over-input",
      version: 1,
      nodes: [
        { id: "a", role: "writer", map: { items: { input: "topic_hint" } } },
        { id: "b", role: "writer", map: { items: { input: "claims.all" } } },
      ],
      input: {
        type: "object",
        properties: { topic_hint: { type: "string" } },
        ...(additionalProperties === undefined ? {} : { additionalProperties }),
      },
    });
    const open = refusal(declared());
    expect(problems(open)).toEqual(["dag.bad_map_path"]);
    expect(open.message).toContain(
      "node a: map.items reads the run input's topic_hint, which the workflow's input declares a string, not a list",
    );
    const shut = refusal(declared(false));
    expect(problems(shut)).toEqual(["dag.bad_map_path", "dag.bad_map_path"]);
    expect(shut.message).toContain(
      "node b: map.items reads the run input's claims, which the workflow's input does not allow (additionalProperties is false)",
    );
    const neither = refusal({
      name: "over-input",
      version: 1,
      nodes: [{ id: "a", role: "writer", map: { items: { path: "claims" } } }],
    } as unknown as WorkflowDefinitionInput);
    expect(neither.code).toBe("dag.invalid_definition");
    expect(neither.message).toContain(
      "nodes.0.map.items: must be { node, path? } (a list in an upstream's output) or { input }",
    );
  });

  it("names nodes no root reaches, a node of two kinds and a loop body left early", () => {
    const e = refusal({
      name: "broken",
      version: 1,
      nodes: [
        { id: "r", role: "x" },
        { id: "p", role: "x" },
        { id: "q", role: "x" },
        { id: "both", role: "x", wait: { seconds: 5 } },
        { id: "w1", role: "x" },
        { id: "w2", role: "x" },
        { id: "side", role: "x" },
      ],
      edges: [
        { from: "p", to: "q" },
        { from: "q", to: "p" },
        { from: "r", to: "both" },
        { from: "r", to: "w1" },
        { from: "w1", to: "w2" },
        { from: "w1", to: "side" },
        { from: "w2", to: "w1", loop: { until: { path: "ok" }, maxRounds: 2 } },
      ],
    });
    expect(problems(e).sort()).toEqual([
      "dag.bad_loop",
      "dag.bad_node",
      "dag.cycle",
      "dag.unreachable",
    ]);
    expect(e.message).toContain("nodes p, q cannot be reached from a root");
    expect(e.message).toContain("edge w1 -> side leaves the loop's body");
  });

  it("reads a child's plan from an upstream, and a child names a workflow or a plan, not both", () => {
    const e = refusal({
      name: "planned",
      version: 1,
      nodes: [
        { id: "a", role: "planner" },
        { id: "run", workflow: { plan: { node: "later", path: "plan" } } },
        { id: "later", role: "planner" },
      ],
      edges: [
        { from: "a", to: "run" },
        { from: "run", to: "later" },
      ],
    });
    expect(problems(e)).toEqual(["dag.bad_plan_path"]);
    expect(e.message).toContain("workflow.plan reads node later, which is not upstream of it");

    const both = refusal({
      name: "planned",
      version: 1,
      nodes: [
        { id: "a", role: "planner" },
        { id: "run", workflow: { name: "sub", version: 2, plan: { node: "a" } } },
        { id: "bare", workflow: { plan: { node: "a" }, version: 2 } },
      ],
    });
    expect(both.code).toBe("dag.invalid_definition");
    expect(both.message).toContain("nodes.1.workflow: give either name");
    expect(both.message).toContain("nodes.2.workflow: version goes with name");
  });

  it("accepts the content workflows unchanged, with their roles known", () => {
    for (const def of CONTENT_WORKFLOWS) {
      const again = defineWorkflow(JSON.parse(JSON.stringify(def)), {
        roles: [...CONTENT_ROLES, "topic-selector", "fact-checker", "writer", "reviewer"],
      });
      expect(again).toEqual(def);
    }
  });
});

describe("the definition language's JSON Schema (npm run schemas)", () => {
  const text = readFileSync(
    join(import.meta.dirname, "..", "..", WORKFLOW_DEFINITION_SCHEMA_FILE),
    "utf8",
  );

  it("is the committed file", () => {
    expect(text).toBe(`${JSON.stringify(workflowDefinitionJsonSchema(), null, 2)}\n`);
  });

  it("accepts the content workflows and a definition with every construct, and refuses a bad join", () => {
    const schema = fromJSONSchema(JSON.parse(text));
    for (const def of CONTENT_WORKFLOWS)
      expect(schema.safeParse(JSON.parse(JSON.stringify(def))).success).toBe(true);
    const constructs = {
      name: "every.construct",
      version: 1,
      nodes: [
        { id: "plan", role: "planner" },
        {
          id: "write",
          role: "writer",
          map: { items: { node: "plan", path: "sections" }, maxFailed: 1 },
        },
        { id: "review", role: "reviewer", join: "quorum", quorum: 1 },
        { id: "hold", wait: { signal: "approved", seconds: 3600 } },
        { id: "publish", workflow: { name: "publishing", input: { text: { node: "write" } } } },
      ],
      edges: [
        { from: "plan", to: "write" },
        { from: "write", to: "review" },
        { from: "review", to: "write", loop: { until: { path: "ok" }, maxRounds: 3 } },
        { from: "review", to: "hold" },
        { from: "hold", to: "publish" },
      ],
    };
    expect(schema.safeParse(constructs).success).toBe(true);
    expect(() => defineWorkflow(constructs as WorkflowDefinitionInput)).not.toThrow();
    const badJoin = { ...constructs, nodes: [{ id: "a", role: "r", join: "most" }] };
    expect(schema.safeParse(badJoin).success).toBe(false);
  });
});
