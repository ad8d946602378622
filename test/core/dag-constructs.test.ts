import { describe, expect, it } from "vitest";
import { childRunId } from "../../functions/core/dag/assignment";
import { onChildEnded } from "../../functions/core/dag/child";
import type { WorkflowDefinitionInput } from "../../functions/core/dag/definition";
import {
  onItemCompleted,
  onItemFailed,
  onNodeCompleted,
  onNodeFailed,
  redeliver,
  startRun,
} from "../../functions/core/dag/engine";
import { DagRequestError } from "../../functions/core/dag/errors";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { cancelRun, rerunFrom } from "../../functions/core/dag/rerun";
import type { DagCommand, DagRun, Transition } from "../../functions/core/dag/run";
import { onSignal, onWaitTimer } from "../../functions/core/dag/wait";
import { deepFreeze } from "../../functions/core/freeze";

/**
 * The constructs beyond plain task nodes: quorum and first-wins joins, map nodes, bounded loops,
 * waits and child runs, one behaviour per test, each run from a frozen input run.
 */

type Assign = Extract<DagCommand, { type: "node.assign" }>;
type NodeInput = WorkflowDefinitionInput["nodes"][number];

const flow = (
  nodes: NodeInput[],
  edges: NonNullable<WorkflowDefinitionInput["edges"]>,
  extra: Partial<WorkflowDefinitionInput> = {},
) => defineWorkflow({ name: "constructs", version: 1, nodes, edges, ...extra });

const task = (id: string, more: Partial<NodeInput> = {}): NodeInput => ({ id, role: id, ...more });
const edge = (from: string, to: string) => ({ from, to });

const assigns = (t: Transition): Assign[] =>
  t.commands.filter((c): c is Assign => c.type === "node.assign");
const assigned = (t: Transition) => assigns(t).map((c) => c.node_id);
const states = (run: DagRun) =>
  Object.fromEntries(Object.entries(run.nodes).map(([id, n]) => [id, n.state]));
const generationOf = (t: Transition, id: string) =>
  t.run.nodes[id]?.assigned_generation ?? t.run.generation;

type Def = ReturnType<typeof flow>;
const complete = (t: Transition, def: Def, id: string, output: unknown = { by: id }) =>
  onNodeCompleted(deepFreeze(t.run), def, id, output, generationOf(t, id));
const fail = (t: Transition, def: Def, id: string) =>
  onNodeFailed(deepFreeze(t.run), def, id, { code: "x.no", message: "no" }, generationOf(t, id));
const itemDone = (t: Transition, def: Def, id: string, item: number, output: unknown = item) =>
  onItemCompleted(deepFreeze(t.run), def, id, item, output, generationOf(t, id));
const itemFailed = (t: Transition, def: Def, id: string, item: number) =>
  onItemFailed(
    deepFreeze(t.run),
    def,
    id,
    item,
    { code: "x.item", message: "bad" },
    generationOf(t, id),
  );

function thrown(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error("expected an error");
}

describe("join quorum", () => {
  const def = flow(
    [task("a"), task("b"), task("c"), task("d"), task("j", { join: "quorum", quorum: 2 })],
    [
      edge("a", "b"),
      edge("a", "c"),
      edge("a", "d"),
      edge("b", "j"),
      edge("c", "j"),
      edge("d", "j"),
    ],
  );

  it("runs once two branches succeeded, with their outputs, and lets the third finish", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    expect(assigned(t)).toEqual(["b", "c", "d"]);
    t = complete(t, def, "c");
    expect(assigned(t)).toEqual([]);
    t = complete(t, def, "b");
    expect(assigns(t)).toEqual([
      expect.objectContaining({ node_id: "j", input: { b: { by: "b" }, c: { by: "c" } } }),
    ]);
    expect(t.run.nodes.j?.joined).toEqual(["b", "c"]);
    expect(states(t.run).d).toBe("RUNNING");
    t = complete(t, def, "d");
    expect(t.commands).toEqual([]);
    // the input stays the first two even when sent again after d finished
    const again = redeliver(deepFreeze(t.run), def, "j", generationOf(t, "j"));
    expect(assigns(again)[0]?.input).toEqual({ b: { by: "b" }, c: { by: "c" } });
    t = complete(t, def, "j");
    expect(t.run.status).toBe("COMPLETED");
  });

  it("is cancelled as soon as too few branches can still succeed", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    t = fail(t, def, "b");
    expect(states(t.run).j).toBe("PENDING");
    t = fail(t, def, "d");
    expect(states(t.run).j).toBe("CANCELLED");
    expect(t.events).toContainEqual({
      type: "node.cancelled",
      node_id: "j",
      reason: "upstream_failed",
      upstreams: ["b", "d"],
    });
    t = complete(t, def, "c");
    expect(t.run.status).toBe("PARTIAL");
  });
});

describe("join first-wins", () => {
  // a -> fast, a -> slow, fast|slow -> j (first-wins), slow -> after
  const def = flow(
    [task("a"), task("fast"), task("slow"), task("j", { join: "first-wins" }), task("after")],
    [
      edge("a", "fast"),
      edge("a", "slow"),
      edge("fast", "j"),
      edge("slow", "j"),
      edge("slow", "after"),
    ],
  );

  it("releases the node with the first success and stops every other running branch", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    const slowGeneration = generationOf(t, "slow");
    t = complete(t, def, "fast");
    expect(assigns(t)).toEqual([
      expect.objectContaining({ node_id: "j", input: { fast: { by: "fast" } } }),
    ]);
    expect(t.commands).toContainEqual(
      expect.objectContaining({ type: "node.cancel", node_id: "slow", reason: "first_wins" }),
    );
    expect(states(t.run)).toMatchObject({ slow: "SKIPPED", after: "SKIPPED", j: "RUNNING" });
    expect(t.events).toContainEqual({
      type: "node.skipped",
      node_id: "slow",
      reason: "first_wins",
      winner: "fast",
    });
    const late = onNodeCompleted(deepFreeze(t.run), def, "slow", {}, slowGeneration);
    expect(late.run).toBe(t.run);
    expect(late.events[0]).toMatchObject({ type: "delivery.ignored", reason: "not_running" });
    t = complete(t, def, "j");
    expect(t.run.status).toBe("COMPLETED");
  });

  it("is cancelled when every branch failed", () => {
    let t = complete(startRun(def, "r", {}), def, "a");
    t = fail(t, def, "fast");
    expect(states(t.run).j).toBe("PENDING");
    t = fail(t, def, "slow");
    expect(states(t.run)).toMatchObject({ j: "CANCELLED", after: "CANCELLED" });
    expect(t.run.status).toBe("PARTIAL");
  });
});

describe("map", () => {
  const mapFlow = (map: Partial<NonNullable<NodeInput["map"]>>) =>
    flow(
      [
        task("plan"),
        task("write", {
          map: { items: { node: "plan", path: "sections" }, concurrency: 2, ...map },
        }),
        task("edit"),
      ],
      [edge("plan", "write"), edge("write", "edit")],
    );
  const sections = { sections: ["s0", "s1", "s2", "s3"] };

  it("runs each item as its own assignment, under the tolerance completes with the failed item marked", () => {
    const def = mapFlow({ maxFailed: 1 });
    let t = complete(startRun(def, "r", {}), def, "plan", sections);
    expect(assigns(t).map((c) => c.item)).toEqual([
      { index: 0, count: 4, value: "s0" },
      { index: 1, count: 4, value: "s1" },
    ]);
    expect(assigns(t)[0]).toMatchObject({
      node_id: "write",
      role: "write",
      attempt: 1,
      // The plan without its list: an item carries its own value, not the whole list again.
      input: { plan: {} },
    });
    t = itemDone(t, def, "write", 0, "w0");
    expect(assigns(t).map((c) => c.item?.index)).toEqual([2]);
    // the same answer again changes nothing
    const duplicate = itemDone(t, def, "write", 0, "w0");
    expect(duplicate.run).toBe(t.run);
    expect(duplicate.events[0]).toMatchObject({
      type: "delivery.ignored",
      item: 0,
      reason: "duplicate",
    });
    t = itemFailed(t, def, "write", 1);
    expect(assigns(t).map((c) => c.item?.index)).toEqual([3]);
    t = itemDone(t, def, "write", 3, "w3");
    t = itemDone(t, def, "write", 2, "w2");
    expect(states(t.run).write).toBe("COMPLETED");
    expect(t.run.nodes.write?.items).toBeUndefined();
    const output = {
      items: [
        { status: "completed", output: "w0" },
        { status: "failed", error: { code: "x.item", message: "bad" } },
        { status: "completed", output: "w2" },
        { status: "completed", output: "w3" },
      ],
      failed: 1,
    };
    expect(t.run.nodes.write?.output).toEqual(output);
    expect(assigns(t)).toEqual([
      expect.objectContaining({ node_id: "edit", input: { write: output } }),
    ]);
  });

  it("over the tolerance cancels the running items and fails the node", () => {
    const def = mapFlow({ maxFailedFraction: 0.25 });
    let t = complete(startRun(def, "r", {}), def, "plan", sections);
    const generation = generationOf(t, "write");
    t = itemFailed(t, def, "write", 1);
    expect(states(t.run).write).toBe("RUNNING");
    t = itemFailed(t, def, "write", 2);
    expect(t.commands).toEqual([
      expect.objectContaining({
        type: "node.cancel",
        node_id: "write",
        item: 0,
        reason: "map_failed",
      }),
    ]);
    expect(states(t.run)).toMatchObject({ write: "FAILED", edit: "CANCELLED" });
    expect(t.run.nodes.write?.error?.code).toBe("dag.map_failed");
    expect(t.run.status).toBe("PARTIAL");
    const late = onItemCompleted(deepFreeze(t.run), def, "write", 0, "w0", generation);
    expect(late.run).toBe(t.run);
  });

  it("fails at its release when the value is not a list or too long, and completes an empty list", () => {
    const def = mapFlow({ maxItems: 3 });
    const notList = complete(startRun(def, "r", {}), def, "plan", { sections: "one" });
    expect(notList.run.nodes.write?.error?.code).toBe("dag.map_items_invalid");
    expect(notList.run.nodes.write?.error?.message).toContain("plan.sections");
    const tooLong = complete(startRun(def, "r", {}), def, "plan", sections);
    expect(tooLong.run.nodes.write?.error?.code).toBe("dag.map_too_many_items");
    const empty = complete(startRun(def, "r", {}), def, "plan", { sections: [] });
    expect(empty.run.nodes.write?.output).toEqual({ items: [], failed: 0 });
    expect(assigned(empty)).toEqual(["edit"]);
  });

  it("counts running items against the role's cap", () => {
    const def = flow(
      [
        task("plan"),
        task("write", { map: { items: { node: "plan", path: "sections" }, concurrency: 4 } }),
      ],
      [edge("plan", "write")],
      { concurrency: { perRole: { write: 1 } } },
    );
    let t = complete(startRun(def, "r", {}), def, "plan", sections);
    expect(assigns(t).map((c) => c.item?.index)).toEqual([0]);
    expect(t.held).toEqual([{ node_id: "write", role: "write", reason: "role_cap" }]);
    t = itemDone(t, def, "write", 0);
    expect(assigns(t).map((c) => c.item?.index)).toEqual([1]);
  });

  it("runs over a list in the run's input, which each item's run input leaves out", () => {
    const def = flow(
      [task("check", { map: { items: { input: "request.claims" }, concurrency: 2 } })],
      [],
    );
    const input = { topic_hint: "tides", request: { claims: ["c0", "c1", "c2"], by: "desk" } };
    let t = startRun(def, "r", input);
    expect(assigns(t).map((c) => c.item)).toEqual([
      { index: 0, count: 3, value: "c0" },
      { index: 1, count: 3, value: "c1" },
    ]);
    expect(assigns(t)[0]).toMatchObject({
      input: {},
      run_input: { topic_hint: "tides", request: { by: "desk" } },
    });
    t = itemDone(t, def, "check", 0);
    t = itemDone(t, def, "check", 1);
    t = itemDone(t, def, "check", 2);
    expect(t.run.status).toBe("COMPLETED");
    expect(t.run.nodes.check?.output).toMatchObject({ failed: 0 });
    expect(t.run.input).toEqual(input);

    const missing = startRun(def, "r", { topic_hint: "tides" });
    expect(missing.run.nodes.check?.error).toMatchObject({
      code: "dag.map_items_invalid",
      message: "map node check: run input request.claims is not a list (got undefined)",
    });
  });

  it("refuses an agent's whole-node answer for a map node", () => {
    const def = mapFlow({});
    const t = complete(startRun(def, "r", {}), def, "plan", sections);
    const e = thrown(() => complete(t, def, "write"));
    expect(e).toBeInstanceOf(DagRequestError);
    expect(e.code).toBe("dag.wrong_node_kind");
  });
});

describe("bounded loop", () => {
  // topic -> write -> review -> publish, review loops back to write until approved
  const loopFlow = (loop: { maxRounds: number; onMax?: "complete" | "fail" }) =>
    flow(
      [task("topic"), task("write"), task("review"), task("publish")],
      [
        edge("topic", "write"),
        edge("write", "review"),
        edge("review", "publish"),
        {
          from: "review",
          to: "write",
          loop: { until: { path: "verdict", equals: "approved" }, ...loop },
        },
      ],
    );

  it("runs the body again with the round before as input, and ends when the condition holds", () => {
    const def = loopFlow({ maxRounds: 3 });
    let t = complete(startRun(def, "r", {}), def, "topic");
    t = complete(t, def, "write", { draft: 1 });
    const firstWrite = 0;
    t = complete(t, def, "review", { verdict: "rejected", notes: "shorter" });
    expect(t.events).toContainEqual({
      type: "loop.round",
      node_id: "write",
      exit: "review",
      round: 2,
      generation: 1,
    });
    expect(assigns(t)).toEqual([
      expect.objectContaining({
        node_id: "write",
        generation: 1,
        attempt: 2,
        input: { topic: { by: "topic" } },
        loop: {
          exit: "review",
          round: 2,
          previous: { write: { draft: 1 }, review: { verdict: "rejected", notes: "shorter" } },
        },
      }),
    ]);
    expect(states(t.run)).toMatchObject({ review: "PENDING", publish: "PENDING" });
    // the first round's answer again is stale
    const stale = onNodeCompleted(deepFreeze(t.run), def, "write", { draft: 1 }, firstWrite);
    expect(stale.events[0]).toMatchObject({ type: "delivery.ignored", reason: "stale_generation" });
    t = complete(t, def, "write", { draft: 2 });
    t = complete(t, def, "review", { verdict: "approved" });
    expect(t.events).toContainEqual({
      type: "loop.ended",
      exit: "review",
      rounds: 2,
      reason: "condition",
    });
    expect(assigns(t)).toEqual([
      expect.objectContaining({ node_id: "publish", input: { review: { verdict: "approved" } } }),
    ]);
    t = complete(t, def, "publish");
    expect(t.run.status).toBe("COMPLETED");
    expect(t.run.loops).toEqual({ review: { round: 2, ended: "condition" } });
  });

  it("ends with the last output and max_rounds when the rounds run out", () => {
    const def = loopFlow({ maxRounds: 2 });
    let t = complete(startRun(def, "r", {}), def, "topic");
    for (let round = 1; round <= 2; round++) {
      t = complete(t, def, "write", { draft: round });
      t = complete(t, def, "review", { verdict: "rejected", round });
    }
    expect(t.events).toContainEqual({
      type: "loop.ended",
      exit: "review",
      rounds: 2,
      reason: "max_rounds",
    });
    expect(t.run.nodes.review).toMatchObject({
      state: "COMPLETED",
      output: { verdict: "rejected", round: 2 },
    });
    expect(assigned(t)).toEqual(["publish"]);
  });

  it("under onMax fail, fails its last node when the rounds run out", () => {
    const def = loopFlow({ maxRounds: 1, onMax: "fail" });
    let t = complete(startRun(def, "r", {}), def, "topic");
    t = complete(t, def, "write");
    t = complete(t, def, "review", { verdict: "rejected" });
    expect(t.run.nodes.review?.error?.code).toBe("dag.loop_max_rounds");
    expect(states(t.run)).toMatchObject({ review: "FAILED", publish: "CANCELLED" });
    expect(t.run.status).toBe("PARTIAL");
  });

  it("repeats a single node with a loop edge onto itself", () => {
    const def = flow(
      [task("poll")],
      [{ from: "poll", to: "poll", loop: { until: { path: "done" }, maxRounds: 5 } }],
    );
    let t = startRun(def, "r", {});
    t = complete(t, def, "poll", { done: false });
    expect(assigns(t)[0]).toMatchObject({
      node_id: "poll",
      loop: { round: 2, previous: { poll: { done: false } } },
    });
    t = complete(t, def, "poll", { done: true });
    expect(t.run.status).toBe("COMPLETED");
  });

  it("tells a body node still running (a branch its quorum join left) to stop when a round begins", () => {
    // a -> {b, c} -> q (quorum 1) -> x, x loops back to a.
    const def = flow(
      [task("a"), task("b"), task("c"), task("q", { join: "quorum", quorum: 1 }), task("x")],
      [
        edge("a", "b"),
        edge("a", "c"),
        edge("b", "q"),
        edge("c", "q"),
        edge("q", "x"),
        { from: "x", to: "a", loop: { until: { path: "done", equals: true }, maxRounds: 2 } },
      ],
    );
    let t = complete(startRun(def, "r", {}), def, "a");
    t = complete(t, def, "b");
    t = complete(t, def, "q");
    expect(t.run.nodes.c?.state).toBe("RUNNING");
    const running = t.run.nodes.c?.assigned_generation;
    t = complete(t, def, "x", { done: false });
    expect(t.commands).toContainEqual(
      expect.objectContaining({
        type: "node.cancel",
        node_id: "c",
        reason: "rerun",
        generation: running,
      }),
    );
    expect(t.run.nodes.c?.state).toBe("PENDING");
    expect(assigned(t)).toEqual(["a"]);
  });

  it("counts its rounds from 1 again after a re-run reaches it", () => {
    const def = loopFlow({ maxRounds: 2 });
    let t = complete(startRun(def, "r", {}), def, "topic");
    t = complete(t, def, "write");
    t = complete(t, def, "review", { verdict: "rejected" });
    expect(t.run.loops?.review?.round).toBe(2);
    t = rerunFrom(deepFreeze(t.run), def, "write");
    expect(t.run.loops).toEqual({});
  });
});

describe("wait", () => {
  const waitFlow = (wait: NonNullable<NodeInput["wait"]>) =>
    flow([task("a"), { id: "w", wait }, task("b")], [edge("a", "w"), edge("w", "b")]);

  it("waits for its signal and is released by it", () => {
    const def = waitFlow({ signal: "approved", seconds: 3600 });
    let t = complete(startRun(def, "r", {}), def, "a");
    expect(t.commands).toEqual([
      {
        type: "wait.start",
        run_id: "r",
        node_id: "w",
        attempt: 1,
        generation: 0,
        after_seconds: 3600,
        signal: "approved",
      },
    ]);
    const other = onSignal(deepFreeze(t.run), def, "rejected", {});
    expect(other.run).toBe(t.run);
    expect(other.events).toEqual([{ type: "signal.unmatched", signal: "rejected" }]);
    t = onSignal(deepFreeze(t.run), def, "approved", { by: "alice" });
    expect(t.run.nodes.w?.output).toEqual({
      released_by: "signal",
      signal: "approved",
      payload: { by: "alice" },
    });
    expect(assigned(t)).toEqual(["b"]);
    expect(onSignal(deepFreeze(t.run), def, "approved", {}).run).toBe(t.run);
    const timer = onWaitTimer(deepFreeze(t.run), def, "w", 0);
    expect(timer.run).toBe(t.run);
    expect(timer.events[0]).toMatchObject({ type: "delivery.ignored", reason: "duplicate" });
  });

  it("fails when its deadline passes before the signal", () => {
    const def = waitFlow({ signal: "approved", until: "2026-12-01T09:00:00Z" });
    let t = complete(startRun(def, "r", {}), def, "a");
    expect(t.commands[0]).toMatchObject({
      type: "wait.start",
      until: "2026-12-01T09:00:00Z",
      signal: "approved",
    });
    t = onWaitTimer(deepFreeze(t.run), def, "w", 0);
    expect(t.run.nodes.w?.error?.code).toBe("dag.wait_deadline");
    expect(states(t.run)).toMatchObject({ w: "FAILED", b: "CANCELLED" });
    expect(onSignal(deepFreeze(t.run), def, "approved", {}).events[0]?.type).toBe(
      "signal.unmatched",
    );
  });

  it("a timer wait completes when its time comes", () => {
    const def = waitFlow({ seconds: 60 });
    let t = complete(startRun(def, "r", {}), def, "a");
    t = onWaitTimer(deepFreeze(t.run), def, "w", 0);
    expect(t.run.nodes.w?.output).toEqual({ released_by: "timer" });
    expect(assigned(t)).toEqual(["b"]);
  });

  it("refuses an agent's answer for a wait node", () => {
    const def = waitFlow({ seconds: 60 });
    const t = complete(startRun(def, "r", {}), def, "a");
    expect(thrown(() => complete(t, def, "w")).code).toBe("dag.wrong_node_kind");
  });
});

describe("child workflow", () => {
  const childFlow = (acceptPartial = false) =>
    flow(
      [
        task("a"),
        {
          id: "c",
          workflow: {
            name: "sub.flow",
            version: 3,
            input: { topic: { node: "a", path: "topic" } },
            acceptPartial,
          },
        },
        task("d"),
      ],
      [edge("a", "c"), edge("c", "d")],
    );

  it("starts the child with its input and completes with the child's outputs", () => {
    const def = childFlow();
    let t = complete(startRun(def, "r", {}), def, "a", { topic: "tides" });
    expect(t.commands).toEqual([
      {
        type: "child.start",
        run_id: "r",
        node_id: "c",
        attempt: 1,
        generation: 0,
        child_run_id: childRunId("r", "c", 1),
        workflow: { name: "sub.flow", version: 3 },
        input: { topic: "tides" },
      },
    ]);
    // An opaque run id, one per parent run, node and attempt.
    expect(childRunId("r", "c", 1)).toMatch(/^run_[a-p]{32}$/);
    expect(
      new Set([childRunId("r", "c", 2), childRunId("r", "d", 1), childRunId("q", "c", 1)]),
    ).not.toContain(childRunId("r", "c", 1));
    t = onChildEnded(deepFreeze(t.run), def, "c", 0, { status: "COMPLETED", outputs: { x: 1 } });
    expect(t.run.nodes.c?.output).toEqual({ status: "COMPLETED", outputs: { x: 1 } });
    expect(assigned(t)).toEqual(["d"]);
  });

  it("cancelling the parent cancels the running child, and the child's late end changes nothing", () => {
    const def = childFlow();
    let t = complete(startRun(def, "r", {}), def, "a", { topic: "tides" });
    t = cancelRun(deepFreeze(t.run), def);
    expect(t.commands).toEqual([
      {
        type: "child.cancel",
        run_id: "r",
        node_id: "c",
        attempt: 1,
        generation: 0,
        child_run_id: childRunId("r", "c", 1),
        reason: "run_cancelled",
      },
    ]);
    expect(t.run.status).toBe("CANCELLED");
    const late = onChildEnded(deepFreeze(t.run), def, "c", 0, { status: "CANCELLED" });
    expect(late.run).toBe(t.run);
  });

  it("a PARTIAL child fails the node unless the node accepts it", () => {
    const strict = childFlow(false);
    const t = complete(startRun(strict, "r", {}), strict, "a", { topic: "x" });
    const failed = onChildEnded(deepFreeze(t.run), strict, "c", 0, {
      status: "PARTIAL",
      outputs: {},
    });
    expect(failed.run.nodes.c?.error?.code).toBe("dag.child_partial");
    const lenient = childFlow(true);
    const u = complete(startRun(lenient, "r", {}), lenient, "a", { topic: "x" });
    const accepted = onChildEnded(deepFreeze(u.run), lenient, "c", 0, {
      status: "PARTIAL",
      outputs: { y: 2 },
    });
    expect(accepted.run.nodes.c).toMatchObject({
      state: "COMPLETED",
      output: { status: "PARTIAL", outputs: { y: 2 } },
    });
  });
});
