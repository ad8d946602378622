import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { DeterministicLocalModel } from "../../functions/adapters/local-model";
import type { MapItemResult } from "../../functions/core/dag/map";
import type { ReviewOutput } from "../../functions/roles/content-agents/events";
import { CLAIM_HEADING } from "../../functions/roles/content-agents/headings";
import {
  CONTENT_AGENT_SCRIPTS,
  NEEDS_REVISION_MARKER,
  REVISED_DRAFT,
  UNSOURCED_CLAIM,
} from "../../functions/roles/content-agents/local-scripts";
import {
  CLAIMS_MAY_FAIL,
  factCheck,
  longForm,
  quickNews,
} from "../../functions/roles/content-agents/workflows";
import { childRunsOf } from "../../functions/roles/orchestrator/child-commands";
import type { NodeBlocked, NodeConfirmRequested } from "../../schemas/events/agent-run";
import type { NodeCompleted, NodeFailed, NodeRequested } from "../../schemas/events/workflow";
import { referenceLocalModel } from "../support/reference";
import { Bus, type Delivery } from "./workflow-bus";

/**
 * The content workflows (the versions a start by kind runs) run by the orchestrator and the
 * content agents on the in-memory bus: topic selection states the claims, the fact check agent
 * checks each one as a map item (one agent run per item; in long form, inside a child run of
 * content.fact-check), and review decides on the final text.
 * The local model's markers drive the cases: `[disputed-claims:N]` has N claims fail their check.
 */

async function run(bus: Bus, workflow: string, hint: string): Promise<string> {
  const runId = `run_${ulid()}`;
  bus.start(runId, workflow, hint);
  await bus.drain();
  return runId;
}

const factCheckRequests = (bus: Bus) =>
  bus.emitted("fact_check.requested").map((e) => e.payload as NodeRequested);
const isFactCheckRequest = (d: Delivery) => d.event.event_type === "fact_check.requested";

describe("the fact check of each claim, by the content agents", () => {
  it("checks every claim once as a map item and completes with a failed claim under the tolerance", async () => {
    const bus = new Bus();
    const runId = await run(bus, "quick-news", "[disputed-claims:1] grid storage");

    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.workflow).toEqual({ name: quickNews.name, version: 3 });
    const claims = bus.claims(runId);
    expect(claims.length).toBeGreaterThanOrEqual(3);
    expect(factCheckRequests(bus).map((r) => r.item)).toEqual(
      claims.map((value, index) => ({ index, count: claims.length, value })),
    );
    // Each item's request leaves the list out: its claim is its own.
    expect(factCheckRequests(bus)[0]?.input["topic-selection"]).not.toHaveProperty("claims");
    expect(bus.model.callCount("fact-check")).toBe(claims.length);
    const answered = [
      ...bus.emitted("fact_check.completed").map((e) => (e.payload as NodeCompleted).item),
      ...bus.emitted("fact_check.failed").map((e) => (e.payload as NodeFailed).item),
    ];
    expect(answered.sort()).toEqual(claims.map((_, index) => index));
    const failed = bus.emitted("fact_check.failed")[0]?.payload as NodeFailed;
    expect(failed).toMatchObject({ item: 1, error: { code: "fact_check.rejected" } });
    // One agent run per item.
    for (const index of claims.keys())
      expect(bus.agentRun(runId, "fact-check", 0, index)?.state).toBe(
        index === 1 ? "FAILED" : "COMPLETED",
      );
    expect(bus.agentRun(runId, "fact-check", 0)).toBeUndefined();

    const [end] = bus.ended(runId);
    expect(end?.type).toBe("workflow.completed");
    const check = end?.result.outputs["fact-check"] as { items: MapItemResult[]; failed: number };
    expect(check.failed).toBe(1);
    const review = end?.result.outputs.review as ReviewOutput;
    expect(review.approved).toBe(true);
    expect(review.final_body).toContain("Paragraph 1");
  });

  it("fails the fact check over its tolerance: review never runs and the run ends PARTIAL", async () => {
    const bus = new Bus();
    const runId = await run(bus, "quick-news", `[disputed-claims:${CLAIMS_MAY_FAIL + 1}] tides`);

    expect(bus.deadLettered).toEqual([]);
    const [end] = bus.ended(runId);
    expect(end?.type).toBe("workflow.partial");
    expect(end?.result.failed).toEqual([
      expect.objectContaining({
        node_id: "fact-check",
        error: expect.objectContaining({ code: "dag.map_failed" }),
      }),
    ]);
    expect(end?.result.cancelled).toEqual(["review"]);
    expect(bus.emitted("review.requested")).toEqual([]);
  });

  it("long form checks the claims in a child run, and writes from its output", async () => {
    const bus = new Bus();
    const runId = await run(bus, "long-form", "[disputed-claims:1] tides");

    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.workflow).toEqual({ name: longForm.name, version: 4 });
    const [childId] = bus.childRuns(runId, "fact-check");
    // What the operator's views read a run's child runs from: its timeline.
    expect(childRunsOf(bus.state(runId))).toEqual([{ nodeId: "fact-check", runId: childId }]);
    const child = bus.state(childId ?? "");
    expect(child.run.workflow).toEqual({ name: factCheck.name, version: factCheck.version });
    expect(child.parent).toEqual({ run_id: runId, node_id: "fact-check", generation: 0 });
    const claims = bus.claims(runId);
    // The child's map runs over the claims its parent gave it, one request per claim, each on
    // the child's stream with its claim alone (the run input leaves the list out).
    const requests = factCheckRequests(bus);
    expect(requests.map((r) => [r.run_id, r.item?.value])).toEqual(
      claims.map((claim) => [childId, claim]),
    );
    expect(requests[0]?.run_input).not.toHaveProperty("claims");
    expect(bus.ended(childId ?? "")[0]?.type).toBe("workflow.completed");
    const [end] = bus.ended(runId);
    expect(end?.type).toBe("workflow.completed");
    const writing = bus.emitted("writing.requested")[0]?.payload as NodeRequested;
    expect(writing.input["fact-check"]).toMatchObject({
      status: "COMPLETED",
      outputs: { "fact-check": { failed: 1 } },
    });
  });

  it("long form writes nothing when the claims did not hold: its child fails, the fact check is DEGRADED", async () => {
    const bus = new Bus();
    const runId = await run(bus, "long-form", `[disputed-claims:${CLAIMS_MAY_FAIL + 1}] tides`);

    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.workflow).toEqual({ name: longForm.name, version: 4 });
    const [childId] = bus.childRuns(runId, "fact-check");
    const [childEnd] = bus.ended(childId ?? "");
    expect(childEnd?.type).toBe("workflow.failed");
    expect(childEnd?.result.failed).toEqual([
      expect.objectContaining({
        node_id: "fact-check",
        error: expect.objectContaining({ code: "dag.map_failed" }),
      }),
    ]);
    const [end] = bus.ended(runId);
    expect(end?.type).toBe("workflow.completed");
    expect(end?.result).toMatchObject({ degraded: ["fact-check"], skipped: ["review", "writing"] });
    expect(bus.state(runId).run.nodes["fact-check"]?.error?.code).toBe("dag.child_failed");
    expect(bus.emitted("writing.requested")).toEqual([]);
  });

  it("runs a redelivered item's request once: the item's agent run answers it again", async () => {
    const bus = new Bus({ duplicate: true });
    const runId = await run(bus, "quick-news", "[disputed-claims:1] grid storage");

    expect(bus.deadLettered).toEqual([]);
    expect(bus.ended(runId)[0]?.type).toBe("workflow.completed");
    expect(bus.model.callCount("fact-check")).toBe(bus.claims(runId).length);
  });

  it("drops a queued item's request whose cancel is behind it, before its model call", async () => {
    // Four claims, the first two disputed: once both failed, the map fails and cancels the
    // other two, whose requests wait behind them in the agent's queue (one run's commands reach
    // the agent in order).
    const claims = [1, 2, 3, 4].map((n) => `Claim ${n}${n <= 2 ? `, ${UNSOURCED_CLAIM}` : ""}.`);
    const model = referenceLocalModel({
      scripts: {
        "topic-selection": () => ({ topic: "Tides", angle: "A", sources: ["kb://s"], claims }),
      },
    });
    const bus = new Bus({ lookAhead: true, model });
    const runId = `run_${ulid()}`;
    bus.start(runId, "quick-news", "tides");
    const queued = (d: Delivery) =>
      isFactCheckRequest(d) && ((d.event.payload as NodeRequested).item?.index ?? 0) >= 2;
    await bus.drain((d) => !queued(d));
    expect(bus.emitted("fact_check.cancel.requested").map((e) => e.payload)).toEqual([
      expect.objectContaining({ node_id: "fact-check", item: 2, reason: "map_failed" }),
      expect.objectContaining({ node_id: "fact-check", item: 3, reason: "map_failed" }),
    ]);
    expect(bus.model.callCount("fact-check")).toBe(2);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    // The agent takes a run's commands in order, so each queued request came before its cancel:
    // it was dropped by looking ahead on the run's stream, never run.
    expect(bus.model.callCount("fact-check")).toBe(2);
    expect([0, 1, 2, 3].map((i) => bus.agentRun(runId, "fact-check", 0, i)?.state)).toEqual([
      "FAILED",
      "FAILED",
      "CANCELLED",
      "CANCELLED",
    ]);
    expect(bus.ended(runId)[0]?.type).toBe("workflow.partial");
  });
});

/** The fact check asks for a confirmation on the claims numbered `claims` until it is given. */
function confirmingOn(...claims: number[]): DeterministicLocalModel {
  const factCheck = CONTENT_AGENT_SCRIPTS["fact-check"];
  if (!factCheck) throw new Error("no fact-check script");
  const asks = (text: string) =>
    claims.some((n) => text.includes(`${CLAIM_HEADING} (${n} of`)) &&
    !text.includes("Confirmation received");
  return referenceLocalModel({
    scripts: {
      "fact-check": (request, facts) =>
        asks(facts.text)
          ? { needs_confirmation: { question: "Does the source stand by the claim?" } }
          : factCheck(request, facts),
    },
  });
}

const confirmFactCheck = (bus: Bus, runId: string) =>
  bus.send(
    bus.command("workflow.confirm.requested", runId, {
      node_id: "fact-check",
      answer: "confirmed",
      requested_by: "alice",
    }),
  );
const blockedItems = (bus: Bus) =>
  bus.emitted("node.blocked").map((e) => (e.payload as NodeBlocked).item);

describe("a claim's fact check that waits for a confirmation", () => {
  it("blocks that item alone, and the confirmation resumes it with its claim", async () => {
    const bus = new Bus({ model: confirmingOn(2), acknowledge: true });
    const runId = await run(bus, "quick-news", "grid storage");

    expect(bus.deadLettered).toEqual([]);
    const blocked = bus.emitted("node.blocked").map((e) => e.payload as NodeBlocked);
    expect(blocked).toEqual([expect.objectContaining({ node_id: "fact-check", item: 1 })]);
    expect(bus.agentRun(runId, "fact-check", 0, 1)?.state).toBe("BLOCKED");
    expect(bus.agentRun(runId, "fact-check", 0, 0)?.state).toBe("COMPLETED");
    expect(bus.state(runId).leases?.["fact-check"]?.blocked).toMatchObject({ item: 1 });

    confirmFactCheck(bus, runId);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const [confirm] = bus.emitted("fact_check.confirm.requested");
    const claims = bus.claims(runId);
    expect((confirm?.payload as NodeConfirmRequested | undefined)?.item).toEqual({
      index: 1,
      count: claims.length,
      value: claims[1],
    });
    expect(bus.agentRun(runId, "fact-check", 0, 1)?.state).toBe("COMPLETED");
    expect(bus.ended(runId)[0]?.type).toBe("workflow.completed");
  });

  it("waits for one item at a time: a second blocked item is taken up when its request is sent again", async () => {
    const bus = new Bus({ model: confirmingOn(1, 2), acknowledge: true, confirmSeconds: 86_400 });
    const runId = await run(bus, "quick-news", "grid storage");
    expect(blockedItems(bus)).toEqual([0, 1]);
    expect(bus.state(runId).leases?.["fact-check"]?.blocked).toMatchObject({ item: 0 });

    confirmFactCheck(bus, runId);
    await bus.drain();
    expect(bus.agentRun(runId, "fact-check", 0, 0)?.state).toBe("COMPLETED");
    expect(bus.agentRun(runId, "fact-check", 0, 1)?.state).toBe("BLOCKED");
    // The node's lease runs out: the item still running is sent again, and answers BLOCKED again.
    bus.clock.advance(2 * 3600 * 1000);
    expect(bus.sweep().map((e) => e.event_type)).toEqual(["node.lease.expired"]);
    await bus.drain();
    expect(blockedItems(bus)).toEqual([0, 1, 1]);
    expect(bus.state(runId).leases?.["fact-check"]?.blocked).toMatchObject({ item: 1 });

    confirmFactCheck(bus, runId);
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    expect(bus.emitted("fact_check.confirm.requested").map((e) => e.payload)).toEqual([
      expect.objectContaining({ item: expect.objectContaining({ index: 0 }) }),
      expect.objectContaining({ item: expect.objectContaining({ index: 1 }) }),
    ]);
    expect(bus.ended(runId)[0]?.type).toBe("workflow.completed");
  });
});

describe("review and writing in rounds, run by the orchestrator", () => {
  it.each(["quick-news", "long-form"])(
    "%s sends a rejected draft back to the writer with the review's notes, and approves the revision",
    async (workflow) => {
      const bus = new Bus();
      const runId = await run(bus, workflow, `${NEEDS_REVISION_MARKER} grid storage`);

      expect(bus.deadLettered).toEqual([]);
      const reviews = bus
        .emitted("review.completed")
        .map((e) => (e.payload as NodeCompleted<ReviewOutput>).output);
      expect(reviews.map((r) => r.approved)).toEqual([false, true]);
      expect(reviews[0]?.notes).toBeDefined();
      const revision = bus.emitted("writing.requested")[1]?.payload as NodeRequested;
      expect(revision.loop).toMatchObject({ exit: "review", round: 2 });
      expect(reviews[1]?.final_body).toContain(REVISED_DRAFT);
      expect(bus.ended(runId)[0]?.type).toBe("workflow.completed");
    },
  );
});
