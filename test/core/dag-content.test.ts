import { describe, expect, it } from "vitest";
import { onChildEnded } from "../../functions/core/dag/child";
import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import {
  onItemCompleted,
  onItemFailed,
  onNodeCompleted,
  startRun,
} from "../../functions/core/dag/engine";
import { runResult } from "../../functions/core/dag/result";
import type { DagCommand, Transition } from "../../functions/core/dag/run";
import {
  CLAIMS_MAY_FAIL,
  factCheck,
  longForm,
  longFormV3,
  quickNews,
  REVIEW_ROUNDS,
} from "../../functions/roles/content-agents/workflows";

/**
 * The content workflows on the pure executor, with scripted answers: the fact check of each claim
 * (a map with a tolerance), review and writing in rounds until review approves (a loop), long
 * form's writing only when the fact check passed enough claims (a condition), and long form v4's
 * fact check as a child run of content.fact-check (a map over its run input's claims).
 */

type Assign = Extract<DagCommand, { type: "node.assign" }>;

const CLAIMS = ["Claim 1", "Claim 2", "Claim 3"];
const TOPIC = { topic: "T", angle: "A", sources: ["kb://s"], claims: CLAIMS };
const DRAFT = { title: "Draft", body: "First draft" };
const REVISED = { title: "Draft", body: "Revised draft" };
const REJECTED = {
  approved: false,
  edits: 2,
  final_title: "Draft",
  final_body: "First draft",
  notes: "name the sources",
};
const APPROVED = { approved: true, edits: 1, final_title: "Final", final_body: "Revised draft" };
const PASS = { verdict: "pass", checked_claims: 1, notes: "consistent" };
const UNSOURCED = { code: "fact_check.rejected", message: "fact check failed: no source" };

const assigns = (t: Transition) => t.commands.filter((c): c is Assign => c.type === "node.assign");
const assigned = (t: Transition) => assigns(t).map((c) => c.node_id);

/** The generation of node `id`'s current assignment. */
const generationOf = (t: Transition, id: string) =>
  t.run.nodes[id]?.assigned_generation ?? t.run.generation;

const answer = (t: Transition, def: WorkflowDefinition, id: string, output: unknown) =>
  onNodeCompleted(t.run, def, id, output, generationOf(t, id));

/** Answer each claim's fact check: the items whose index is in `failing` fail. */
function checkClaims(t: Transition, def: WorkflowDefinition, failing: readonly number[] = []) {
  let next = t;
  for (const index of CLAIMS.keys())
    next = failing.includes(index)
      ? onItemFailed(
          next.run,
          def,
          "fact-check",
          index,
          UNSOURCED,
          generationOf(next, "fact-check"),
        )
      : onItemCompleted(next.run, def, "fact-check", index, PASS, generationOf(next, "fact-check"));
  return next;
}

describe("quick news v3: claims checked in parallel, review and writing in rounds", () => {
  it("checks each claim as a map item, and sends a rejected draft back to writing with the review", () => {
    let t = startRun(quickNews, "run_q3", { topic_hint: "batteries" });
    t = answer(t, quickNews, "topic-selection", TOPIC);
    const items = assigns(t).filter((c) => c.node_id === "fact-check");
    expect(items.map((c) => c.item)).toEqual(
      CLAIMS.map((value, index) => ({ index, count: 3, value })),
    );
    // Each item carries its claim; the input leaves the list out.
    expect(items[0]?.input).toEqual({
      "topic-selection": { topic: "T", angle: "A", sources: ["kb://s"] },
    });
    expect(assigned(t)).toContain("writing");
    t = answer(t, quickNews, "writing", DRAFT);
    t = checkClaims(t, quickNews, [1]);
    expect(t.run.nodes["fact-check"]?.state).toBe("COMPLETED");
    const review = assigns(t).find((c) => c.node_id === "review");
    expect(review?.input["fact-check"]).toMatchObject({ failed: 1 });
    expect(review?.loop).toBeUndefined();

    t = answer(t, quickNews, "review", REJECTED);
    const revision = assigns(t).find((c) => c.node_id === "writing");
    expect(revision?.loop).toEqual({
      exit: "review",
      round: 2,
      previous: { writing: DRAFT, review: REJECTED },
    });
    t = answer(t, quickNews, "writing", REVISED);
    expect(assigns(t).find((c) => c.node_id === "review")?.input).toMatchObject({
      writing: REVISED,
    });
    t = answer(t, quickNews, "review", APPROVED);

    expect(t.run.status).toBe("COMPLETED");
    expect(t.run.loops?.review).toMatchObject({ round: 2, ended: "condition" });
    expect(runResult(t.run).outputs.review).toEqual(APPROVED);
  });

  it("fails the fact check over its tolerance, cancelling review: the run ends PARTIAL", () => {
    let t = startRun(quickNews, "run_q3", {});
    t = answer(t, quickNews, "topic-selection", TOPIC);
    t = answer(t, quickNews, "writing", DRAFT);
    const failing = Array.from({ length: CLAIMS_MAY_FAIL + 1 }, (_, i) => i);
    t = checkClaims(t, quickNews, failing);

    expect(t.run.status).toBe("PARTIAL");
    const result = runResult(t.run);
    expect(result.failed).toEqual([
      { node_id: "fact-check", error: expect.objectContaining({ code: "dag.map_failed" }) },
    ]);
    expect(result.cancelled).toEqual(["review"]);
    expect(result.outputs.writing).toEqual(DRAFT);
  });

  it("keeps the last review after its last round when review never approves", () => {
    let t = startRun(quickNews, "run_q3", {});
    t = answer(t, quickNews, "topic-selection", TOPIC);
    t = checkClaims(t, quickNews);
    for (let round = 1; round <= REVIEW_ROUNDS; round++) {
      expect(assigns(t).find((c) => c.node_id === "writing")?.loop?.round).toBe(
        round === 1 ? undefined : round,
      );
      t = answer(t, quickNews, "writing", DRAFT);
      t = answer(t, quickNews, "review", REJECTED);
    }

    expect(assigned(t)).toEqual([]);
    expect(t.run.status).toBe("COMPLETED");
    expect(t.run.loops?.review).toMatchObject({ round: REVIEW_ROUNDS, ended: "max_rounds" });
    expect(runResult(t.run).outputs.review).toEqual(REJECTED);
  });
});

describe("long form v3: writing only on a fact check that passed enough claims", () => {
  it("writes, reviews and revises when the claims held within the tolerance", () => {
    let t = startRun(longFormV3, "run_l3", {});
    t = answer(t, longFormV3, "topic-selection", TOPIC);
    expect(assigned(t)).toEqual(["fact-check", "fact-check", "fact-check"]);
    t = checkClaims(t, longFormV3, [2]);
    expect(assigned(t)).toEqual(["writing"]);
    expect(assigns(t)[0]?.input["fact-check"]).toMatchObject({ failed: 1 });
    t = answer(t, longFormV3, "writing", DRAFT);
    t = answer(t, longFormV3, "review", REJECTED);
    expect(assigned(t)).toEqual(["writing"]);
    t = answer(t, longFormV3, "writing", REVISED);
    t = answer(t, longFormV3, "review", APPROVED);

    expect(t.run.status).toBe("COMPLETED");
    expect(runResult(t.run)).toMatchObject({
      completed: ["fact-check", "review", "topic-selection", "writing"],
      outputs: { review: APPROVED },
    });
  });

  it("degrades the fact check over its tolerance and writes nothing", () => {
    let t = startRun(longFormV3, "run_l3", {});
    t = answer(t, longFormV3, "topic-selection", TOPIC);
    t = checkClaims(t, longFormV3, [0, 1]);

    expect(assigned(t)).toEqual([]);
    expect(t.run.status).toBe("COMPLETED");
    expect(runResult(t.run)).toMatchObject({
      completed: ["topic-selection"],
      degraded: ["fact-check"],
      skipped: ["review", "writing"],
      outputs: { "fact-check": {} },
    });
  });
});

type ChildStart = Extract<DagCommand, { type: "child.start" }>;

/**
 * Long form v4 to its fact check, which it runs as a child: the child run of content.fact-check
 * started as the orchestrator starts it (the parent's input with the node's input over it), its
 * claims checked (those in `failing` fail), and its end handed back to the parent.
 */
function longFormThroughItsChild(failing: readonly number[]) {
  const input = { topic_hint: "heat islands" };
  let t = startRun(longForm, "run_l4", input);
  t = answer(t, longForm, "topic-selection", TOPIC);
  expect(assigned(t)).toEqual([]);
  const start = t.commands.find((c): c is ChildStart => c.type === "child.start");
  expect(start).toMatchObject({
    node_id: "fact-check",
    workflow: { name: factCheck.name, version: factCheck.version },
    input: { claims: CLAIMS, sources: ["kb://s"] },
  });
  const childInput = { ...input, ...(start?.input as Record<string, unknown>) };
  let child = startRun(factCheck, start?.child_run_id ?? "", childInput);
  const items = assigns(child);
  expect(items.map((c) => c.item?.value)).toEqual(CLAIMS);
  // Each item carries its claim: the run input it gets leaves the list out.
  expect(items[0]?.run_input).toEqual({ topic_hint: "heat islands", sources: ["kb://s"] });
  child = checkClaims(child, factCheck, failing);
  const { status, outputs } = runResult(child.run);
  if (status === "RUNNING") throw new Error("the child run has not ended");
  const parent = onChildEnded(t.run, longForm, "fact-check", generationOf(t, "fact-check"), {
    status,
    outputs,
  });
  return { child, parent };
}

describe("long form v4: the fact check a child run, writing only when it passed enough claims", () => {
  it("writes once the child checked the claims within the tolerance, reading its output", () => {
    const { child, parent } = longFormThroughItsChild([2]);
    expect(child.run.status).toBe("COMPLETED");
    let t = parent;
    expect(assigned(t)).toEqual(["writing"]);
    expect(assigns(t)[0]?.input["fact-check"]).toMatchObject({
      status: "COMPLETED",
      outputs: { "fact-check": { failed: 1 } },
    });
    t = answer(t, longForm, "writing", DRAFT);
    t = answer(t, longForm, "review", REJECTED);
    t = answer(t, longForm, "writing", REVISED);
    t = answer(t, longForm, "review", APPROVED);

    expect(t.run.status).toBe("COMPLETED");
    expect(t.run.loops?.review).toMatchObject({ round: 2, ended: "condition" });
    expect(runResult(t.run).outputs.review).toEqual(APPROVED);
  });

  it("degrades the fact check when its child fails over the tolerance, and writes nothing", () => {
    const { child, parent } = longFormThroughItsChild([0, 1]);
    expect(child.run.status).toBe("FAILED");

    expect(assigned(parent)).toEqual([]);
    expect(parent.run.status).toBe("COMPLETED");
    expect(parent.run.nodes["fact-check"]?.error?.code).toBe("dag.child_failed");
    expect(runResult(parent.run)).toMatchObject({
      completed: ["topic-selection"],
      degraded: ["fact-check"],
      skipped: ["review", "writing"],
      outputs: { "fact-check": {} },
    });
  });
});
