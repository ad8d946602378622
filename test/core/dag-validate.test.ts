import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fromJSONSchema } from "zod";
import type { WorkflowDefinitionInput } from "../../functions/core/dag/definition";
import { WorkflowDefinitionError } from "../../functions/core/dag/errors";
import { defineWorkflow, graphOf } from "../../functions/core/dag/graph";
import {
  WORKFLOW_DEFINITION_SCHEMA_FILE,
  workflowDefinitionJsonSchema,
} from "../../functions/core/dag/json-schema";
import { checkedDefinition, MAX_DEFINITION_BYTES } from "../../functions/core/dag/register";
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

describe("loops: each loop edge's body, and what is wrong with it", () => {
  const LOOP = { until: { path: "ok" }, maxRounds: 2 } as const;
  type Pair = readonly [string, string];

  /** A definition of role nodes `ids`, forward edges `forward` and loop edges `loops`. */
  function looped(ids: readonly string[], forward: readonly Pair[], loops: readonly Pair[]) {
    return {
      name: "looped",
      version: 1,
      nodes: ids.map((id) => ({ id, role: "r" })),
      edges: [
        ...forward.map(([from, to]) => ({ from, to })),
        ...loops.map(([from, to]) => ({ from, to, loop: LOOP })),
      ],
    };
  }

  /** The loops as compiled: last node, first node and body. */
  const loopsOf = (input: WorkflowDefinitionInput) =>
    [...graphOf(defineWorkflow(input)).loops.values()].map(({ exit, head, body }) => ({
      exit,
      head,
      body,
    }));

  const messages = (e: WorkflowDefinitionError) =>
    (e.details.problems as { code: string; message: string }[]).map((p) => [p.code, p.message]);

  it("compiles a loop's body as the nodes between its ends: one node, a chain, a diamond, loops side by side", () => {
    expect(loopsOf(looped(["a", "b"], [["a", "b"]], [["b", "b"]]))).toEqual([
      { exit: "b", head: "b", body: ["b"] },
    ]);
    const diamond = looped(
      ["a", "b", "c", "d", "e", "x"],
      [
        ["x", "a"],
        ["a", "b"],
        ["a", "c"],
        ["b", "d"],
        ["c", "d"],
        ["d", "e"],
      ],
      [["d", "a"]],
    );
    expect(loopsOf(diamond)).toEqual([{ exit: "d", head: "a", body: ["a", "b", "c", "d"] }]);
    const sideBySide = looped(
      ["a", "b", "c", "d"],
      [
        ["a", "b"],
        ["b", "c"],
        ["c", "d"],
      ],
      [
        ["d", "c"],
        ["b", "a"],
      ],
    );
    expect(loopsOf(sideBySide)).toEqual([
      { exit: "d", head: "c", body: ["c", "d"] },
      { exit: "b", head: "a", body: ["a", "b"] },
    ]);
  });

  it("names a loop that loops nothing, two loops of one last node, bodies that share nodes and a body left early", () => {
    const e = refusal(
      looped(
        ["a", "b", "c", "d", "e", "s", "t", "x"],
        [
          ["a", "b"],
          ["b", "c"],
          ["c", "d"],
          ["b", "e"],
          ["x", "s"],
          ["x", "t"],
        ],
        [
          ["d", "a"],
          ["d", "b"],
          ["c", "b"],
          ["s", "t"],
        ],
      ),
    );
    expect(messages(e)).toEqual([
      [
        "dag.bad_loop",
        "loop edge d -> a: edge b -> e leaves the loop's body before its last node d",
      ],
      ["dag.bad_loop", "loop edge d -> b: d already ends another loop"],
      ["dag.bad_loop", "loop edge c -> b: its body shares b, c with another loop"],
      [
        "dag.bad_loop",
        "loop edge c -> b: edge b -> e leaves the loop's body before its last node c",
      ],
      ["dag.bad_loop", "loop edge s -> t: t is not upstream of s, so nothing loops"],
    ]);
  });

  it("a definition too large to register is refused for its size and name before its structure is checked", () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `node-${i}-${"x".repeat(300)}`);
    // Every loop edge loops nothing: compiled, each would be a problem of its own.
    const input = looped(
      ids,
      [],
      ids.slice(1).map((id, i) => [ids[i] ?? "", id] as const),
    );
    expect(Buffer.byteLength(JSON.stringify(input))).toBeGreaterThan(MAX_DEFINITION_BYTES);
    const refused = (() => {
      try {
        checkedDefinition({ ...input, name: "Too Large" }, {});
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(WorkflowDefinitionError);
    expect(problems(refused as WorkflowDefinitionError)).toEqual([
      "workflow.bad_name",
      "workflow.too_large",
    ]);
  });

  it("compiles a chain of 1000 nodes, each looping on itself", () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `n${i}`);
    const chain = ids.slice(1).map((id, i) => [ids[i] ?? "", id] as const);
    const loops = loopsOf(
      looped(
        ids,
        chain,
        ids.map((id) => [id, id] as const),
      ),
    );
    expect(loops).toHaveLength(1000);
    expect(loops.every(({ exit, head, body }) => head === exit && body.join() === exit)).toBe(true);
  });

  it("for random graphs, compiles the bodies and names the problems the rules give", () => {
    /** Forward edges i -> j (i < j) of n nodes, and loop edges j -> i (i <= j), by index. */
    const graphs = fc.integer({ min: 2, max: 9 }).chain((n) => {
      const pair = fc.tuple(fc.nat({ max: n - 1 }), fc.nat({ max: n - 1 }));
      return fc.record({
        n: fc.constant(n),
        forward: fc.uniqueArray(
          pair.filter(([i, j]) => i < j),
          {
            selector: ([i, j]) => `${i} ${j}`,
            maxLength: 16,
          },
        ),
        loops: fc.uniqueArray(
          pair.filter(([i, j]) => i >= j),
          {
            selector: ([i, j]) => `${i} ${j}`,
            maxLength: 4,
          },
        ),
      });
    });
    fc.assert(
      fc.property(graphs, ({ n, forward, loops }) => {
        const ids = Array.from({ length: n }, (_, i) => `n${i}`);
        const name = (i: number) => ids[i] ?? "";
        const input = looped(
          ids,
          forward.map(([i, j]) => [name(i), name(j)] as const),
          loops.map(([i, j]) => [name(i), name(j)] as const),
        );
        const expected = loopRules(n, forward, loops, name);
        if (expected.problems.length === 0) expect(loopsOf(input)).toEqual(expected.loops);
        else expect(messages(refusal(input))).toEqual(expected.problems);
      }),
      { numRuns: 300 },
    );
  });

  /**
   * The loop rules, from reachability by matrix: a body is every node its first node reaches
   * and that reaches its last; the last node must be one; a node ends one loop; bodies share no
   * node; only the last node has edges leaving the body (in the order the edges are given).
   */
  function loopRules(
    n: number,
    forward: readonly (readonly [number, number])[],
    loops: readonly (readonly [number, number])[],
    name: (i: number) => string,
  ) {
    const reaches = Array.from({ length: n }, (_, i) =>
      Array.from({ length: n }, (_, j) => i === j),
    );
    for (const [i, j] of forward) (reaches[i] as boolean[])[j] = true;
    for (let k = 0; k < n; k++)
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++)
          if (reaches[i]?.[k] && reaches[k]?.[j]) (reaches[i] as boolean[])[j] = true;
    const problems: string[][] = [];
    const compiled: { exit: string; head: string; body: string[] }[] = [];
    const owned = new Set<number>();
    const ended = new Set<number>();
    for (const [from, to] of loops) {
      const edge = `loop edge ${name(from)} -> ${name(to)}`;
      const between = [...Array(n).keys()].filter((x) => reaches[to]?.[x] && reaches[x]?.[from]);
      if (!between.includes(from)) {
        problems.push([
          "dag.bad_loop",
          `${edge}: ${name(to)} is not upstream of ${name(from)}, so nothing loops`,
        ]);
        continue;
      }
      if (ended.has(from)) {
        problems.push(["dag.bad_loop", `${edge}: ${name(from)} already ends another loop`]);
        continue;
      }
      const body = between.map(name).sort();
      const shared = body.filter((id) => between.some((x) => owned.has(x) && name(x) === id));
      if (shared.length > 0)
        problems.push([
          "dag.bad_loop",
          `${edge}: its body shares ${shared.join(", ")} with another loop`,
        ]);
      for (const id of body) {
        const x = between.find((b) => name(b) === id) ?? -1;
        owned.add(x);
        if (x === from) continue;
        const leaving = forward
          .filter(([i, j]) => i === x && !between.includes(j))
          .map(([, j]) => name(j))
          .sort();
        for (const out of leaving)
          problems.push([
            "dag.bad_loop",
            `${edge}: edge ${id} -> ${out} leaves the loop's body before its last node ${name(from)}`,
          ]);
      }
      ended.add(from);
      compiled.push({ exit: name(from), head: name(to), body });
    }
    return { problems, loops: compiled };
  }
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
