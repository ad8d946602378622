import { describe, expect, it } from "vitest";
import { onNodeCompleted, onNodeFailed, startRun } from "../../functions/core/dag/engine";
import { DagRequestError } from "../../functions/core/dag/errors";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { resetNode, resolveNode } from "../../functions/core/dag/resolve";
import type { Transition } from "../../functions/core/dag/run";

/**
 * What a person does with a FAILED node: reset it (it and its descendants run again) or resolve it
 * with a supplied output (it counts as COMPLETED with it, without an agent; the descendants run).
 */

// a -> b -> d, a -> c -> d
const def = defineWorkflow({
  name: "test.resolve",
  version: 1,
  nodes: [
    { id: "a", role: "r" },
    { id: "b", role: "r" },
    { id: "c", role: "r" },
    { id: "d", role: "r" },
  ],
  edges: [
    { from: "a", to: "b" },
    { from: "a", to: "c" },
    { from: "b", to: "d" },
    { from: "c", to: "d" },
  ],
});

const boom = { code: "model.invalid_output", message: "the model never answered in shape" };
const assigned = (t: Transition) =>
  t.commands.flatMap((c) => (c.type === "node.assign" ? [c.node_id] : []));
const states = (t: Transition) =>
  Object.fromEntries(Object.entries(t.run.nodes).map(([id, n]) => [id, n.state]));

/** a and c completed, b FAILED, d CANCELLED: the run ended PARTIAL. */
function partialRun(): Transition {
  let t = startRun(def, "run_resolve", { hint: "x" });
  t = onNodeCompleted(t.run, def, "a", { a: 1 }, 0);
  t = onNodeCompleted(t.run, def, "c", { c: 1 }, 0);
  t = onNodeFailed(t.run, def, "b", boom, 0);
  return t;
}

describe("resolveNode", () => {
  it("completes the FAILED node with the supplied output, without assigning it, and runs what was cancelled below it", () => {
    const before = partialRun();
    expect(before.run.status).toBe("PARTIAL");
    expect(states(before)).toEqual({ a: "COMPLETED", b: "FAILED", c: "COMPLETED", d: "CANCELLED" });

    const t = resolveNode(before.run, def, "b", { b: "by hand" });
    expect(t.run.generation).toBe(1);
    expect(t.run.status).toBe("RUNNING");
    expect(t.run.nodes.b).toMatchObject({ state: "COMPLETED", output: { b: "by hand" } });
    expect(t.run.nodes.b?.error).toBeUndefined();
    expect(assigned(t)).toEqual(["d"]);
    const assign = t.commands.find((c) => c.type === "node.assign");
    expect(assign).toMatchObject({ input: { b: { b: "by hand" }, c: { c: 1 } }, generation: 1 });
    // The failed assignment is closed for its agent: generation 0, reason resolved.
    expect(t.commands.filter((c) => c.type === "node.cancel")).toEqual([
      expect.objectContaining({ node_id: "b", generation: 0, reason: "resolved" }),
    ]);
    expect(t.events.map((e) => e.type)).toContain("node.resolved");

    const done = onNodeCompleted(t.run, def, "d", { d: 1 }, 1);
    expect(done.run.status).toBe("COMPLETED");
    expect(done.events.at(-1)).toMatchObject({
      type: "run.completed",
      result: { outputs: { b: { b: "by hand" } } },
    });
  });

  it("ignores a late answer of the failed assignment once the node is resolved", () => {
    const t = resolveNode(partialRun().run, def, "b", { b: "by hand" });
    const late = onNodeCompleted(t.run, def, "b", { b: "late" }, 0);
    expect(late.run).toBe(t.run);
    expect(late.events).toEqual([expect.objectContaining({ type: "delivery.ignored" })]);
  });

  it("refuses a node that is not FAILED, and a repeated resolve, changing nothing", () => {
    const before = partialRun();
    for (const node of ["a", "d"]) {
      const error = (() => {
        try {
          resolveNode(before.run, def, node, {});
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(DagRequestError);
      expect((error as DagRequestError).code).toBe("dag.node_not_failed");
    }
    const once = resolveNode(before.run, def, "b", { b: 1 });
    expect(() => resolveNode(once.run, def, "b", { b: 2 })).toThrow(/only a FAILED node/);
    expect(before.run.nodes.b?.state).toBe("FAILED");
  });
});

describe("resetNode", () => {
  it("runs the FAILED node again under a new generation and closes the failed assignment", () => {
    const t = resetNode(partialRun().run, def, "b");
    expect(t.run.generation).toBe(1);
    expect(assigned(t)).toEqual(["b"]);
    expect(states(t)).toMatchObject({ b: "RUNNING", d: "PENDING" });
    expect(t.commands.filter((c) => c.type === "node.cancel")).toEqual([
      expect.objectContaining({ node_id: "b", generation: 0, reason: "reset" }),
    ]);
  });

  it("refuses a node that is not FAILED", () => {
    expect(() => resetNode(partialRun().run, def, "c")).toThrow(DagRequestError);
  });
});
