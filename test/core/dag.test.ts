import { describe, expect, it } from "vitest";
import {
  conditionHolds,
  type WorkflowDefinition,
  type WorkflowDefinitionInput,
} from "../../functions/core/dag/definition";
import { onNodeCompleted, onNodeFailed, release, startRun } from "../../functions/core/dag/engine";
import {
  DagIntegrityError,
  DagRequestError,
  WorkflowDefinitionError,
} from "../../functions/core/dag/errors";
import { defineWorkflow, descendantsOf } from "../../functions/core/dag/graph";
import { cancelRun, rerunFrom } from "../../functions/core/dag/rerun";
import { runResult } from "../../functions/core/dag/result";
import {
  type DagCommand,
  type DagRun,
  DagRunSchema,
  type Transition,
} from "../../functions/core/dag/run";
import { PermanentError, TransientError } from "../../functions/core/errors";
import {
  contentWorkflowFor,
  longForm,
  longFormV2,
  quickNews,
  quickNewsV2,
} from "../../functions/roles/content-agents/workflows";

// ---------------------------------------------------------------------------------------------
// helpers

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

type EdgeInput = NonNullable<WorkflowDefinitionInput["edges"]>[number];

/** Nodes with role = id unless given as "id:role"; edges as [from, to] or full definitions. */
function wf(
  nodes: (string | WorkflowDefinitionInput["nodes"][number])[],
  edges: ([string, string] | EdgeInput)[] = [],
  extra: Partial<WorkflowDefinitionInput> = {},
): WorkflowDefinition {
  return defineWorkflow({
    name: "test.flow",
    version: 1,
    nodes: nodes.map((n) => {
      if (typeof n !== "string") return n;
      const [id = n, role = id] = n.split(":");
      return { id, role };
    }),
    edges: edges.map((e) => (Array.isArray(e) ? { from: e[0], to: e[1] } : e)),
    ...extra,
  });
}

const assigned = (t: Transition) =>
  t.commands.filter((c) => c.type === "node.assign").map((c) => c.node_id);
const assignOf = (t: Transition, id: string) =>
  t.commands.find(
    (c): c is Extract<DagCommand, { type: "node.assign" }> =>
      c.type === "node.assign" && c.node_id === id,
  );
const states = (run: DagRun) =>
  Object.fromEntries(Object.entries(run.nodes).map(([id, n]) => [id, n.state]));
const eventTypes = (t: Transition) => t.events.map((e) => e.type);

/** Complete `id` under the generation of its current assignment; the input run is frozen first. */
function complete(t: Transition, def: WorkflowDefinition, id: string, output: unknown = { id }) {
  const run = deepFreeze(t.run);
  const generation = run.nodes[id]?.assigned_generation ?? run.generation;
  return onNodeCompleted(run, def, id, output, generation);
}

function fail(t: Transition, def: WorkflowDefinition, id: string, error: unknown = boom) {
  const run = deepFreeze(t.run);
  const generation = run.nodes[id]?.assigned_generation ?? run.generation;
  return onNodeFailed(run, def, id, error, generation);
}

const boom = { code: "agent.crashed", message: "the agent gave up" };

function definitionError(fn: () => unknown): WorkflowDefinitionError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(WorkflowDefinitionError);
    expect(error).toBeInstanceOf(PermanentError);
    return error as WorkflowDefinitionError;
  }
  throw new Error("expected a WorkflowDefinitionError");
}

function thrown(fn: () => unknown): PermanentError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(PermanentError);
    return error as PermanentError;
  }
  throw new Error("expected an error");
}

// ---------------------------------------------------------------------------------------------

describe("defineWorkflow", () => {
  it("applies defaults and freezes the definition", () => {
    const def = defineWorkflow({ name: "d", version: 1, nodes: [{ id: "a", role: "r" }] });
    expect(def.nodes[0]).toEqual({ id: "a", role: "r", degrade: "fail", join: "all" });
    expect(def.edges).toEqual([]);
    expect(Object.isFrozen(def)).toBe(true);
    expect(Object.isFrozen(def.nodes[0])).toBe(true);
  });

  it("survives a JSON round trip (definitions are data)", () => {
    const copy = defineWorkflow(JSON.parse(JSON.stringify(quickNews)));
    expect(copy).toEqual(quickNews);
  });

  it("rejects a duplicate node id", () => {
    const e = definitionError(() => wf(["a", "b", "a:other"]));
    expect(e.code).toBe("dag.duplicate_node");
    expect(e.errorClass).toBe("permanent");
    expect(e.message).toContain("node id a");
  });

  it("rejects an edge naming an unknown node", () => {
    const e = definitionError(() => wf(["a", "b"], [["a", "ghost"]]));
    expect(e.code).toBe("dag.unknown_node");
    expect(e.message).toContain("ghost");
  });

  it("rejects a duplicate edge, even with another condition, so in-degree never counts twice", () => {
    const plain = definitionError(() =>
      wf(
        ["a", "b"],
        [
          ["a", "b"],
          ["a", "b"],
        ],
      ),
    );
    expect(plain.code).toBe("dag.duplicate_edge");
    expect(plain.message).toContain("a -> b");
    const conditional = definitionError(() =>
      wf(
        ["a", "b"],
        [
          { from: "a", to: "b", when: { path: "v", equals: 1 } },
          { from: "a", to: "b", when: { path: "v", equals: 2 } },
        ],
      ),
    );
    expect(conditional.code).toBe("dag.duplicate_edge");
  });

  it("rejects a self-loop", () => {
    const e = definitionError(() =>
      wf(
        ["a", "b"],
        [
          ["a", "b"],
          ["b", "b"],
        ],
      ),
    );
    expect(e.code).toBe("dag.self_loop");
    expect(e.message).toContain("b -> b");
  });

  it("rejects a cycle and names its nodes", () => {
    const e = definitionError(() =>
      wf(
        ["r", "b", "c", "d"],
        [
          ["r", "b"],
          ["b", "c"],
          ["c", "d"],
          ["d", "b"],
        ],
      ),
    );
    expect(e.code).toBe("dag.cycle");
    expect(e.message).toContain("b -> c -> d -> b");
    expect(e.details.nodes).toEqual(["b", "c", "d"]);
  });

  it("rejects a workflow without a root node", () => {
    const empty = definitionError(() => wf([]));
    expect(empty.code).toBe("dag.no_root");
    const closed = definitionError(() =>
      wf(
        ["a", "b"],
        [
          ["a", "b"],
          ["b", "a"],
        ],
      ),
    );
    expect(closed.code).toBe("dag.no_root");
    expect(closed.message).toContain("a -> b -> a");
  });

  it("rejects bad concurrency values and names them", () => {
    const zero = definitionError(() => wf(["a"], [], { concurrency: { global: 0 } }));
    expect(zero.code).toBe("dag.bad_concurrency");
    expect(zero.message).toContain("concurrency.global");
    expect(zero.message).toContain("got 0");
    const fraction = definitionError(() => wf(["a"], [], { concurrency: { perRole: { a: 1.5 } } }));
    expect(fraction.code).toBe("dag.bad_concurrency");
    expect(fraction.message).toContain("1.5");
    const negative = definitionError(() => wf(["a"], [], { concurrency: { perRole: { a: -1 } } }));
    expect(negative.message).toContain("-1");
    const unknownRole = definitionError(() =>
      wf(["a"], [], { concurrency: { perRole: { typo: 2 } } }),
    );
    expect(unknownRole.code).toBe("dag.bad_concurrency");
    expect(unknownRole.message).toContain("typo");
  });

  it("rejects malformed definitions with the path and the bad value", () => {
    const badId = definitionError(() => wf(["a b"]));
    expect(badId.code).toBe("dag.invalid_definition");
    expect(badId.message).toContain("nodes.0.id");
    expect(badId.message).toContain('"a b"');
    const badDegrade = definitionError(() =>
      defineWorkflow({
        name: "d",
        version: 1,
        // @ts-expect-error: not a degrade policy
        nodes: [{ id: "a", role: "r", degrade: "maybe" }],
      }),
    );
    expect(badDegrade.message).toContain('"maybe"');
    const typo = definitionError(() =>
      // @ts-expect-error: unknown key
      defineWorkflow({ name: "d", version: 1, nodes: [{ id: "a", role: "r", degrad: "empty" }] }),
    );
    expect(typo.code).toBe("dag.invalid_definition");
    const both = definitionError(() =>
      wf(["a", "b"], [{ from: "a", to: "b", when: { path: "v", equals: 1, in: [1] } }]),
    );
    expect(both.message).toContain("either equals or in");
    const version = definitionError(() => defineWorkflow({ name: "d", version: 0, nodes: [] }));
    expect(version.message).toContain("version");
  });

  it("lists a node and its descendants", () => {
    expect(descendantsOf(quickNews, "writing")).toEqual(["review", "writing"]);
    expect(descendantsOf(longForm, "fact-check")).toEqual(["fact-check", "review", "writing"]);
    expect(thrown(() => descendantsOf(quickNews, "nope")).code).toBe("dag.unknown_node");
  });
});

describe("startRun, fan-out and fan-in", () => {
  const def = wf(
    ["a", "b", "c", "d", "join"],
    [
      ["a", "d"],
      ["a", "c"],
      ["a", "b"],
      ["b", "join"],
      ["c", "join"],
      ["d", "join"],
    ],
  );

  it("releases the roots with the run input", () => {
    const t = startRun(def, "run_1", { topic: "x" });
    expect(t.run.status).toBe("RUNNING");
    expect(t.run.generation).toBe(0);
    expect(t.commands).toEqual([
      {
        type: "node.assign",
        run_id: "run_1",
        node_id: "a",
        role: "a",
        attempt: 1,
        generation: 0,
        input: {},
        run_input: { topic: "x" },
      },
    ]);
    expect(eventTypes(t)).toEqual(["run.started", "node.ready", "node.released"]);
    expect(states(t.run)).toEqual({
      a: "RUNNING",
      b: "PENDING",
      c: "PENDING",
      d: "PENDING",
      join: "PENDING",
    });
    expect(t.run.nodes.join?.remaining_upstreams).toBe(3);
    expect(DagRunSchema.parse(t.run)).toEqual(t.run);
  });

  it("fans out: every downstream of a completed node starts, in node-id order", () => {
    const t = complete(startRun(def, "run_1", {}), def, "a", { topic: "t" });
    expect(assigned(t)).toEqual(["b", "c", "d"]);
    expect(assignOf(t, "c")?.input).toEqual({ a: { topic: "t" } });
    expect(t.run.nodes.join?.remaining_upstreams).toBe(3);
  });

  it("fans in: the join starts only after every upstream completed, with all their outputs", () => {
    let t = complete(startRun(def, "run_1", {}), def, "a");
    t = complete(t, def, "c", "C");
    expect(assigned(t)).toEqual([]);
    expect(t.run.nodes.join).toMatchObject({ state: "PENDING", remaining_upstreams: 2 });
    t = complete(t, def, "b", "B");
    expect(assigned(t)).toEqual([]);
    t = complete(t, def, "d", "D");
    expect(assigned(t)).toEqual(["join"]);
    expect(assignOf(t, "join")?.input).toEqual({ b: "B", c: "C", d: "D" });
    t = complete(t, def, "join", "done");
    expect(t.run.status).toBe("COMPLETED");
    const last = t.events.at(-1);
    expect(last?.type).toBe("run.completed");
    expect(runResult(t.run).outputs).toMatchObject({ join: "done", b: "B" });
    expect(DagRunSchema.parse(t.run)).toEqual(t.run);
  });

  it("starts every root of a multi-root workflow", () => {
    const multi = wf(["x", "y", "z"], [["x", "z"]]);
    expect(assigned(startRun(multi, "r", null))).toEqual(["x", "y"]);
  });

  it("never mutates the run it is given", () => {
    const t0 = startRun(def, "run_1", {});
    const snapshot = structuredClone(t0.run);
    deepFreeze(t0.run);
    const t1 = complete(t0, def, "a");
    fail(t1, def, "b");
    expect(t0.run).toEqual(snapshot);
  });

  it("rejects an empty run id", () => {
    expect(thrown(() => startRun(def, "", {})).code).toBe("dag.bad_run_id");
  });
});

describe("conditional branches", () => {
  const def = wf(
    ["router", "approve", "reject", "notify", "archive", "publish"],
    [
      { from: "router", to: "approve", when: { path: "verdict", equals: "ok" } },
      { from: "router", to: "reject", when: { path: "verdict", in: ["bad", "spam"] } },
      { from: "reject", to: "notify" },
      { from: "approve", to: "publish" },
      { from: "notify", to: "archive" },
      { from: "publish", to: "archive" },
    ],
  );

  it("runs only the chosen branch; the other is SKIPPED and skipping propagates", () => {
    let t = startRun(def, "r", {});
    t = complete(t, def, "router", { verdict: "ok" });
    expect(assigned(t)).toEqual(["approve"]);
    expect(states(t.run)).toMatchObject({ reject: "SKIPPED", notify: "SKIPPED" });
    expect(t.events.filter((e) => e.type === "node.skipped").map((e) => e.node_id)).toEqual([
      "reject",
      "notify",
    ]);
    // archive has one skipped upstream and one still open: it waits.
    expect(t.run.nodes.archive).toMatchObject({ state: "PENDING", remaining_upstreams: 1 });
    t = complete(t, def, "approve", "A");
    t = complete(t, def, "publish", "P");
    expect(assignOf(t, "archive")?.input).toEqual({ publish: "P" });
    t = complete(t, def, "archive");
    expect(t.run.status).toBe("COMPLETED");
    expect(runResult(t.run).skipped).toEqual(["notify", "reject"]);
  });

  it("takes the other branch for another output (in)", () => {
    let t = complete(startRun(def, "r", {}), def, "router", { verdict: "spam" });
    expect(assigned(t)).toEqual(["reject"]);
    expect(states(t.run)).toMatchObject({ approve: "SKIPPED", publish: "SKIPPED" });
    t = complete(t, def, "reject");
    t = complete(t, def, "notify", "N");
    expect(assignOf(t, "archive")?.input).toEqual({ notify: "N" });
  });

  it("skips everything below when no branch matches, and the run completes", () => {
    const t = complete(startRun(def, "r", {}), def, "router", { verdict: "unknown" });
    expect(t.run.status).toBe("COMPLETED");
    expect(states(t.run)).toEqual({
      router: "COMPLETED",
      approve: "SKIPPED",
      reject: "SKIPPED",
      notify: "SKIPPED",
      publish: "SKIPPED",
      archive: "SKIPPED",
    });
  });

  it("runs a node with one untaken conditional edge and one taken plain edge", () => {
    const mixed = wf(
      ["a", "b", "c"],
      [["a", "b"], { from: "a", to: "c", when: { path: "go", equals: true } }, ["b", "c"]],
    );
    let t = complete(startRun(mixed, "r", {}), mixed, "a", { go: false });
    t = complete(t, mixed, "b", "B");
    expect(assignOf(t, "c")?.input).toEqual({ b: "B" });
  });

  it("evaluates dot paths, deep equality and truthiness", () => {
    const out = { checks: [{ status: "pass", tags: ["x"] }], flag: 1, empty: "" };
    expect(conditionHolds({ path: "checks.0.status", equals: "pass" }, out)).toBe(true);
    expect(conditionHolds({ path: "checks.0.tags", equals: ["x"] }, out)).toBe(true);
    expect(conditionHolds({ path: "checks.0", in: [{ status: "pass", tags: ["x"] }] }, out)).toBe(
      true,
    );
    expect(conditionHolds({ path: "checks.1.status", equals: "pass" }, out)).toBe(false);
    expect(conditionHolds({ path: "flag" }, out)).toBe(true);
    expect(conditionHolds({ path: "empty" }, out)).toBe(false);
    expect(conditionHolds({ path: "constructor" }, {})).toBe(false);
    expect(conditionHolds({ path: "a", equals: null }, { a: null })).toBe(true);
    expect(conditionHolds({ path: "a", equals: null }, {})).toBe(false);
    expect(conditionHolds(undefined, undefined)).toBe(true);
  });
});

describe("failure propagation", () => {
  // a -> b -> d -> f ; a -> c -> d ; c -> e
  const def = wf(
    ["a", "b", "c", "d", "e", "f"],
    [
      ["a", "b"],
      ["a", "c"],
      ["b", "d"],
      ["c", "d"],
      ["c", "e"],
      ["d", "f"],
    ],
  );

  it("cancels the downstream not started, keeps the running sibling, ends PARTIAL when nothing runs", () => {
    let t = complete(startRun(def, "r", {}), def, "a", "A");
    expect(assigned(t)).toEqual(["b", "c"]);
    t = fail(t, def, "b");
    expect(states(t.run)).toMatchObject({
      b: "FAILED",
      c: "RUNNING",
      d: "CANCELLED",
      f: "CANCELLED",
    });
    expect(t.events).toContainEqual({
      type: "node.cancelled",
      node_id: "d",
      reason: "upstream_failed",
      upstreams: ["b"],
    });
    expect(t.events).toContainEqual({
      type: "node.cancelled",
      node_id: "f",
      reason: "upstream_failed",
      upstreams: ["d"],
    });
    expect(t.run.status).toBe("RUNNING");
    expect(t.run.nodes.b?.error).toEqual(boom);
    // the sibling finishes; its own downstream e still runs; d stays cancelled.
    t = complete(t, def, "c", "C");
    expect(assigned(t)).toEqual(["e"]);
    expect(t.run.nodes.d).toMatchObject({ state: "CANCELLED", remaining_upstreams: 0 });
    expect(t.run.status).toBe("RUNNING");
    t = complete(t, def, "e", "E");
    expect(t.run.status).toBe("PARTIAL");
    const result = runResult(t.run);
    expect(result.outputs).toEqual({ a: "A", c: "C", e: "E" });
    expect(result.failed).toEqual([{ node_id: "b", error: boom }]);
    expect(result.cancelled).toEqual(["d", "f"]);
    expect(t.events.at(-1)).toEqual({ type: "run.partial", result });
  });

  it("ends FAILED when a root fails and nothing produced output", () => {
    const t = fail(startRun(def, "r", {}), def, "a");
    expect(t.run.status).toBe("FAILED");
    expect(runResult(t.run).cancelled).toEqual(["b", "c", "d", "e", "f"]);
    expect(t.events.at(-1)?.type).toBe("run.failed");
  });

  it("records the error's code and class", () => {
    let t = startRun(def, "r", {});
    t = fail(t, def, "a", new TransientError("model.timeout", "took too long"));
    expect(t.run.nodes.a?.error).toEqual({
      code: "model.timeout",
      message: "took too long",
      error_class: "transient",
    });
    const plain = fail(startRun(def, "r", {}), def, "a", new RangeError("nope"));
    expect(plain.run.nodes.a?.error).toEqual({ code: "unexpected", message: "RangeError: nope" });
    const text = fail(startRun(def, "r", {}), def, "a", "just text");
    expect(text.run.nodes.a?.error).toEqual({ code: "unexpected", message: "just text" });
  });

  describe('join "any-success"', () => {
    const tolerant = wf(
      ["a", "b", "c", { id: "d", role: "d", join: "any-success" }, "e"],
      [
        ["a", "b"],
        ["a", "c"],
        ["b", "d"],
        ["c", "d"],
        ["d", "e"],
      ],
    );

    it("runs with the branches that succeeded once all have ended", () => {
      let t = complete(startRun(tolerant, "r", {}), tolerant, "a");
      t = fail(t, tolerant, "b");
      expect(t.run.nodes.d).toMatchObject({ state: "PENDING", remaining_upstreams: 1 });
      t = complete(t, tolerant, "c", "C");
      expect(assignOf(t, "d")?.input).toEqual({ c: "C" });
      t = complete(t, tolerant, "d");
      t = complete(t, tolerant, "e");
      expect(t.run.status).toBe("PARTIAL");
    });

    it("is cancelled when every branch failed", () => {
      let t = complete(startRun(tolerant, "r", {}), tolerant, "a");
      t = fail(t, tolerant, "c");
      t = fail(t, tolerant, "b");
      expect(states(t.run)).toMatchObject({ d: "CANCELLED", e: "CANCELLED" });
      expect(t.run.status).toBe("PARTIAL");
    });
  });
});

describe("DEGRADED nodes", () => {
  const def = wf(
    ["a", { id: "b", role: "b", degrade: "empty" }, "c", "d", "x"],
    [
      ["a", "b"],
      ["a", "c"],
      ["b", "d"],
      ["c", "d"],
      { from: "b", to: "x", when: { path: "ok", equals: true } },
    ],
  );

  it("turns a failure into an empty output and lets downstream continue", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    t = fail(t, def, "b");
    expect(t.run.nodes.b).toMatchObject({ state: "DEGRADED", output: {}, error: boom });
    expect(t.events).toContainEqual({
      type: "node.degraded",
      node_id: "b",
      generation: 0,
      error: boom,
    });
    // a conditional edge out of a degraded node is evaluated on {}: not taken.
    expect(t.run.nodes.x?.state).toBe("SKIPPED");
    t = complete(t, def, "c", "C");
    expect(assignOf(t, "d")?.input).toEqual({ b: {}, c: "C" });
    t = complete(t, def, "d");
    expect(t.run.status).toBe("COMPLETED");
    expect(runResult(t.run).degraded).toEqual(["b"]);
  });
});

describe("at-least-once deliveries", () => {
  const def = wf(
    ["a", "b", "c"],
    [
      ["a", "b"],
      ["b", "c"],
    ],
  );

  it("ignores a duplicate completion and reports it", () => {
    const t1 = complete(startRun(def, "r", {}), def, "a", "A");
    const again = onNodeCompleted(t1.run, def, "a", "A2", 0);
    expect(again.run).toBe(t1.run);
    expect(again.commands).toEqual([]);
    expect(again.events).toEqual([
      {
        type: "delivery.ignored",
        node_id: "a",
        outcome: "completed",
        generation: 0,
        reason: "duplicate",
        state: "COMPLETED",
      },
    ]);
    // a failure report for a node that already completed is a duplicate too.
    const late = onNodeFailed(t1.run, def, "a", boom, 0);
    expect(late.run).toBe(t1.run);
    expect(late.events[0]).toMatchObject({ reason: "duplicate", outcome: "failed" });
  });

  it("ignores a completion for a node that was never assigned", () => {
    const t = startRun(def, "r", {});
    const early = onNodeCompleted(t.run, def, "c", "C", 0);
    expect(early.run).toBe(t.run);
    expect(early.events[0]).toMatchObject({ reason: "not_running", state: "PENDING" });
  });

  it("ignores a completion from before a re-run as stale", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    t = rerunFrom(t.run, def, "b"); // b was RUNNING at generation 0
    expect(t.commands).toContainEqual({
      type: "node.cancel",
      run_id: "r",
      node_id: "b",
      role: "b",
      attempt: 1,
      generation: 0,
      reason: "rerun",
    });
    expect(assignOf(t, "b")).toMatchObject({ attempt: 2, generation: 1 });
    const stale = onNodeCompleted(t.run, def, "b", "old", 0);
    expect(stale.run).toBe(t.run);
    expect(stale.events[0]).toMatchObject({ reason: "stale_generation", state: "RUNNING" });
    const fresh = onNodeCompleted(t.run, def, "b", "new", 1);
    expect(fresh.run.nodes.b?.output).toBe("new");
  });

  it("rejects a generation the run has not reached and an unknown node", () => {
    const t = startRun(def, "r", {});
    const ahead = thrown(() => onNodeCompleted(t.run, def, "a", {}, 3));
    expect(ahead).toBeInstanceOf(DagIntegrityError);
    expect(ahead.code).toBe("dag.bad_generation");
    const unknown = thrown(() => onNodeCompleted(t.run, def, "zz", {}, 0));
    expect(unknown).toBeInstanceOf(DagRequestError);
    expect(unknown.code).toBe("dag.unknown_node");
    expect(unknown.message).toContain("zz");
  });

  it("rejects a run of another workflow", () => {
    const t = startRun(def, "r", {});
    const other = thrown(() => onNodeCompleted(t.run, quickNews, "a", {}, 0));
    expect(other.code).toBe("dag.workflow_mismatch");
  });
});

describe("integrity", () => {
  const def = wf(
    ["a", "b", "c", "d"],
    [
      ["a", "b"],
      ["a", "c"],
      ["b", "d"],
      ["c", "d"],
    ],
  );

  it("raises on a negative in-degree instead of clamping it", () => {
    const t = complete(startRun(def, "r", {}), def, "a");
    // Corrupt the run as a double-counted completion would: d already has nothing left to wait for.
    const corrupted: DagRun = {
      ...t.run,
      nodes: {
        ...t.run.nodes,
        d: { state: "CANCELLED", remaining_upstreams: 0, attempt: 0 },
      },
    };
    const e = thrown(() => onNodeCompleted(corrupted, def, "b", {}, 0));
    expect(e).toBeInstanceOf(DagIntegrityError);
    expect(e.code).toBe("dag.negative_indegree");
    expect(e.message).toContain("node d");
    expect(e.message).toContain("-1");
  });

  it("raises when a counter reaches 0 while an upstream is still open", () => {
    const t = complete(startRun(def, "r", {}), def, "a");
    const corrupted: DagRun = {
      ...t.run,
      nodes: { ...t.run.nodes, d: { state: "PENDING", remaining_upstreams: 1, attempt: 0 } },
    };
    const e = thrown(() => onNodeCompleted(corrupted, def, "b", {}, 0));
    expect(e.code).toBe("dag.indegree_mismatch");
  });

  it("raises when the run lacks a node of its definition", () => {
    const t = startRun(def, "r", {});
    const { d: _gone, ...nodes } = t.run.nodes;
    const e = thrown(() => release({ ...t.run, nodes }, def));
    expect(e.code).toBe("dag.run_mismatch");
  });
});

describe("partial re-run", () => {
  // a -> b -> c ; a -> x
  const def = wf(
    ["a", "b", "c", "x"],
    [
      ["a", "b"],
      ["b", "c"],
      ["a", "x"],
    ],
  );

  it("re-runs only the node and its descendants, keeping the rest, and completes", () => {
    let t = complete(startRun(def, "r", {}), def, "a", "A");
    t = fail(t, def, "b");
    t = complete(t, def, "x", "X");
    expect(t.run.status).toBe("PARTIAL");
    expect(t.run.nodes.c?.state).toBe("CANCELLED");

    t = rerunFrom(deepFreeze(t.run), def, "b");
    expect(t.run.status).toBe("RUNNING");
    expect(t.run.generation).toBe(1);
    expect(t.events[0]).toEqual({ type: "run.rerun", from: "b", generation: 1, nodes: ["b", "c"] });
    expect(assigned(t)).toEqual(["b"]);
    expect(assignOf(t, "b")).toMatchObject({ attempt: 2, generation: 1, input: { a: "A" } });
    // the seed's in-degree is stripped of its upstream outside the scope; c waits for b only.
    expect(t.run.nodes.b).toMatchObject({ state: "RUNNING", remaining_upstreams: 0 });
    expect(t.run.nodes.b?.error).toBeUndefined();
    expect(t.run.nodes.c).toMatchObject({ state: "PENDING", remaining_upstreams: 1 });
    expect(t.run.nodes.a).toMatchObject({ state: "COMPLETED", output: "A", attempt: 1 });
    expect(t.run.nodes.x).toMatchObject({ state: "COMPLETED", output: "X", attempt: 1 });

    t = complete(t, def, "b", "B");
    expect(assigned(t)).toEqual(["c"]);
    expect(assignOf(t, "c")).toMatchObject({ generation: 1, attempt: 1 });
    t = complete(t, def, "c", "C");
    expect(t.run.status).toBe("COMPLETED");
    expect(runResult(t.run).outputs).toEqual({ a: "A", b: "B", c: "C", x: "X" });
  });

  it("leaves running nodes outside the scope alone and still accepts their completions", () => {
    let t = complete(startRun(def, "r", {}), def, "a", "A");
    t = complete(t, def, "b", "B"); // c runs now, x is still running from generation 0
    t = rerunFrom(t.run, def, "c");
    expect(t.commands.filter((c) => c.type === "node.cancel").map((c) => c.node_id)).toEqual(["c"]);
    expect(t.run.nodes.x).toMatchObject({ state: "RUNNING", assigned_generation: 0 });
    t = onNodeCompleted(t.run, def, "x", "X", 0);
    expect(t.run.nodes.x?.state).toBe("COMPLETED");
    t = complete(t, def, "c");
    expect(t.run.status).toBe("COMPLETED");
  });

  it("re-runs a whole completed run from the root", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    for (const id of ["b", "x", "c"]) t = complete(t, def, id);
    expect(t.run.status).toBe("COMPLETED");
    t = rerunFrom(t.run, def, "a");
    expect(assignOf(t, "a")).toMatchObject({ attempt: 2, generation: 1, input: {} });
    expect(states(t.run)).toEqual({ a: "RUNNING", b: "PENDING", c: "PENDING", x: "PENDING" });
  });

  it("refuses to re-run a node whose upstream failed or whose edges are not taken", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    t = fail(t, def, "b");
    const blocked = thrown(() => rerunFrom(t.run, def, "c"));
    expect(blocked.code).toBe("dag.rerun_blocked");
    expect(blocked.message).toContain("upstream b");

    const branchy = wf(["a", "b"], [{ from: "a", to: "b", when: { path: "go", equals: true } }]);
    const done = complete(startRun(branchy, "r", {}), branchy, "a", { go: false });
    expect(done.run.nodes.b?.state).toBe("SKIPPED");
    expect(thrown(() => rerunFrom(done.run, branchy, "b")).code).toBe("dag.rerun_blocked");
  });
});

describe("concurrency caps and backpressure", () => {
  const roots = (n: number, role = (i: number) => `r${i}`) =>
    Array.from({ length: n }, (_, i) => `n${String(i).padStart(2, "0")}:${role(i)}`);

  it("caps RUNNING nodes globally and releases more as nodes finish", () => {
    const def = wf(roots(5), [], { concurrency: { global: 2 } });
    let t = startRun(def, "r", {});
    expect(assigned(t)).toEqual(["n00", "n01"]);
    expect(t.held).toEqual([
      { node_id: "n02", role: "r2", reason: "global_cap" },
      { node_id: "n03", role: "r3", reason: "global_cap" },
      { node_id: "n04", role: "r4", reason: "global_cap" },
    ]);
    expect(t.run.nodes.n02?.state).toBe("READY");
    t = complete(t, def, "n01");
    expect(assigned(t)).toEqual(["n02"]);
  });

  it("defaults the global cap to 16", () => {
    const def = wf(roots(20));
    const t = startRun(def, "r", {});
    expect(assigned(t)).toHaveLength(16);
    expect(t.held.map((h) => h.reason)).toEqual(Array(4).fill("global_cap"));
  });

  it("caps RUNNING nodes per role", () => {
    const def = wf(
      roots(5, (i) => (i % 2 === 0 ? "writer" : "reviewer")),
      [],
      { concurrency: { perRole: { writer: 1 } } },
    );
    let t = startRun(def, "r", {});
    expect(assigned(t)).toEqual(["n00", "n01", "n03"]);
    expect(t.held).toEqual([
      { node_id: "n02", role: "writer", reason: "role_cap" },
      { node_id: "n04", role: "writer", reason: "role_cap" },
    ]);
    t = complete(t, def, "n01");
    expect(assigned(t)).toEqual([]);
    t = complete(t, def, "n00");
    expect(assigned(t)).toEqual(["n02"]);
  });

  it("holds back a role whose queue depth reached the threshold", () => {
    const def = wf(["a:writer", "b:reviewer", "c:writer"]);
    let t = startRun(def, "r", {}, { queueDepth: { writer: 5 }, threshold: 5 });
    expect(assigned(t)).toEqual(["b"]);
    expect(t.held).toEqual([
      { node_id: "a", role: "writer", reason: "queue_depth" },
      { node_id: "c", role: "writer", reason: "queue_depth" },
    ]);
    // still deep: nothing moves; completions do not bypass the gate either.
    t = onNodeCompleted(t.run, def, "b", "B", 0, { queueDepth: { writer: 7 }, threshold: 5 });
    expect(assigned(t)).toEqual([]);
    expect(t.run.status).toBe("RUNNING");
    // the queue drained below the threshold: release counts what it releases in this pass.
    t = release(t.run, def, { queueDepth: { writer: 4 }, threshold: 5 });
    expect(assigned(t)).toEqual(["a"]);
    expect(t.held).toEqual([{ node_id: "c", role: "writer", reason: "queue_depth" }]);
    t = release(t.run, def, { queueDepth: { writer: 0 }, threshold: 5 });
    expect(assigned(t)).toEqual(["c"]);
  });

  it("does nothing when there is nothing READY", () => {
    const def = wf(["a"]);
    const t = startRun(def, "r", {});
    const again = release(t.run, def);
    expect(again.commands).toEqual([]);
    expect(again.run).toEqual(t.run);
  });
});

describe("cancelRun", () => {
  const def = wf(
    ["a", "b", "c"],
    [
      ["a", "b"],
      ["a", "c"],
    ],
  );

  it("cancels every node not ended, stops running ones, and ignores their late completions", () => {
    let t = complete(startRun(def, "r", {}), def, "a", "A");
    t = cancelRun(deepFreeze(t.run), def);
    expect(t.run.status).toBe("CANCELLED");
    expect(states(t.run)).toEqual({ a: "COMPLETED", b: "CANCELLED", c: "CANCELLED" });
    expect(t.commands.map((c) => [c.type, c.node_id])).toEqual([
      ["node.cancel", "b"],
      ["node.cancel", "c"],
    ]);
    expect(t.events.at(-1)).toMatchObject({
      type: "run.cancelled",
      result: { outputs: { a: "A" } },
    });
    const late = onNodeCompleted(t.run, def, "b", {}, 0);
    expect(late.run).toBe(t.run);
    expect(late.events[0]).toMatchObject({ reason: "not_running" });
    expect(cancelRun(t.run, def).events).toEqual([]);
  });
});

describe("content production (seed §6)", () => {
  it("picks the workflow by request kind", () => {
    expect(contentWorkflowFor({ kind: "quick-news" })).toBe(quickNews);
    expect(contentWorkflowFor({ kind: "long-form" })).toBe(longForm);
    const e = thrown(() => contentWorkflowFor({ kind: "poem" }));
    expect(e.code).toBe("dag.unknown_content_kind");
    expect(e.message).toContain('"poem"');
  });

  it("quick news: fact check and writing in parallel, review after both", () => {
    let t = startRun(quickNewsV2, "run_q", { brief: "AI news" });
    expect(assignOf(t, "topic-selection")).toMatchObject({
      role: "topic-selection",
      run_input: { brief: "AI news" },
    });
    t = complete(t, quickNewsV2, "topic-selection", { topic: "T" });
    expect(assigned(t)).toEqual(["fact-check", "writing"]);
    expect(assignOf(t, "writing")?.role).toBe("writing");
    t = complete(t, quickNewsV2, "writing", { draft: "D" });
    expect(assigned(t)).toEqual([]);
    t = complete(t, quickNewsV2, "fact-check", { verified: true });
    expect(assignOf(t, "review")).toMatchObject({
      role: "review",
      input: { "fact-check": { verified: true }, writing: { draft: "D" } },
    });
    t = complete(t, quickNewsV2, "review", { final: "F" });
    expect(t.run.status).toBe("COMPLETED");
  });

  it("long form: fact check, then writing, then review", () => {
    let t = startRun(longFormV2, "run_l", {});
    t = complete(t, longFormV2, "topic-selection", { topic: "T" });
    expect(assigned(t)).toEqual(["fact-check"]);
    t = complete(t, longFormV2, "fact-check", { facts: ["f"] });
    expect(assigned(t)).toEqual(["writing"]);
    expect(assignOf(t, "writing")?.input).toEqual({ "fact-check": { facts: ["f"] } });
    t = complete(t, longFormV2, "writing", { draft: "D" });
    expect(assigned(t)).toEqual(["review"]);
    t = complete(t, longFormV2, "review");
    expect(t.run.status).toBe("COMPLETED");
  });

  it("quick news: a fact-check failure cancels review and reports a partial result", () => {
    let t = startRun(quickNewsV2, "run_q", {});
    t = complete(t, quickNewsV2, "topic-selection", { topic: "T" });
    t = fail(t, quickNewsV2, "fact-check", { code: "facts.unverifiable", message: "no sources" });
    expect(states(t.run)).toMatchObject({ review: "CANCELLED", writing: "RUNNING" });
    expect(t.run.status).toBe("RUNNING");
    t = complete(t, quickNewsV2, "writing", { draft: "D" });
    expect(assigned(t)).toEqual([]);
    expect(t.run.status).toBe("PARTIAL");
    const result = runResult(t.run);
    expect(result.outputs).toEqual({ "topic-selection": { topic: "T" }, writing: { draft: "D" } });
    expect(result.failed).toEqual([
      { node_id: "fact-check", error: { code: "facts.unverifiable", message: "no sources" } },
    ]);
    expect(result.cancelled).toEqual(["review"]);
    expect(t.events.at(-1)).toEqual({ type: "run.partial", result });
  });

  it("long form: a fact-check failure cancels writing and review", () => {
    let t = startRun(longFormV2, "run_l", {});
    t = complete(t, longFormV2, "topic-selection", { topic: "T" });
    t = fail(t, longFormV2, "fact-check");
    expect(t.run.status).toBe("PARTIAL");
    expect(runResult(t.run)).toMatchObject({
      outputs: { "topic-selection": { topic: "T" } },
      cancelled: ["review", "writing"],
    });
  });
});
