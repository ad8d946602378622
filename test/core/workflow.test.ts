import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { MapItemResult } from "../../functions/core/dag/map";
import { TransientError } from "../../functions/core/errors";
import { agentRunKey, contentAgentRole } from "../../functions/roles/content-agents/content-agent";
import { CONTENT_ROLES, contentEventTypes } from "../../functions/roles/content-agents/events";
import { FAIL_FACT_CHECK_MARKER } from "../../functions/roles/content-agents/local-scripts";
import { CLAIMS_MAY_FAIL } from "../../functions/roles/content-agents/workflows";
import {
  ORCHESTRATOR_SUBSCRIPTIONS,
  orchestratorSubscriptions,
} from "../../functions/roles/orchestrator/orchestrator";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { registry } from "../../schemas";
import {
  REFERENCE_STEP_ROLES,
  referenceLocalModel,
  referenceOrchestrator,
} from "../support/reference";
import { Bus } from "./workflow-bus";

const newRunId = () => `run_${ulid()}`;

/** The node steps of a run's timeline: [event, node]. */
const nodeSteps = (state: OrchestratorState) =>
  state.timeline
    .filter((t) => t.node_id !== undefined && t.event !== "node.ready")
    .map((t) => `${t.event} ${t.node_id}`);

// ---------------------------------------------------------------------------------------------

describe("content workflow: orchestrator and content agents on one in-memory bus", () => {
  it("quick news: each claim's fact check and writing run in parallel after topic selection, review after both", async () => {
    const bus = new Bus();
    const runId = newRunId();
    bus.start(runId, "quick-news");
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    const claims = bus.claims(runId);
    expect(claims.length).toBeGreaterThanOrEqual(2);
    expect(nodeSteps(state)).toEqual([
      "node.released topic-selection",
      "node.completed topic-selection",
      "node.released fact-check",
      "map.started fact-check",
      ...claims.map(() => "item.released fact-check"),
      "node.released writing",
      ...claims.map(() => "item.completed fact-check"),
      "node.completed fact-check",
      "node.completed writing",
      "node.released review",
      "node.completed review",
    ]);
    // Review approved the first draft: the loop ended on its condition after one round.
    expect(state.run.loops?.review).toMatchObject({ round: 1, ended: "condition" });
    // Both branches were released by the same decision, before either had finished.
    const released = state.timeline.filter((t) => t.event === "node.released");
    expect(released[1]?.at).toBe(released[2]?.at);
    expect(released[1]?.cause).toBe("topic_selection.completed");
    // Review's input holds both branches; its output kept the writer's title.
    const reviewRequest = bus.emitted("review.requested")[0]?.payload as {
      input: Record<string, unknown>;
    };
    expect(Object.keys(reviewRequest.input).sort()).toEqual(["fact-check", "writing"]);
    const [ended] = bus.ended(runId);
    expect(ended?.type).toBe("workflow.completed");
    const outputs = ended?.result.outputs as Record<string, Record<string, unknown>>;
    expect(outputs.review?.final_title).toBe(outputs.writing?.title);
    expect(ended?.result.completed).toEqual(["fact-check", "review", "topic-selection", "writing"]);
    const check = outputs["fact-check"] as { items: MapItemResult[]; failed: number };
    expect(check.items.map((i) => i.status)).toEqual(claims.map(() => "completed"));
    expect(check.failed).toBe(0);
    // Each agent ran once, the fact check once a claim, through IDLE -> READY -> RUNNING -> COMPLETED.
    for (const role of CONTENT_ROLES)
      expect(bus.model.callCount(role), role).toBe(role === "fact-check" ? claims.length : 1);
    expect(bus.agentRun(runId, "writing")?.history.map((h) => h.to)).toEqual([
      "READY",
      "RUNNING",
      "COMPLETED",
    ]);
    // Every command and outcome of the run is ordered by the run id.
    const traffic = bus.store.log.filter((e) =>
      /\.(requested|completed|failed)$/.test(e.event_type),
    );
    expect(new Set(traffic.map((e) => e.order_key))).toEqual(new Set([runId]));
  });

  it("long form runs its nodes one after the other, the fact check a child run, writing once the claims held", async () => {
    const bus = new Bus();
    const runId = newRunId();
    bus.start(runId, "long-form");
    await bus.drain();
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    const claims = bus.claims(runId);
    const [childId] = bus.childRuns(runId, "fact-check");
    const child = bus.state(childId ?? "");
    expect(child.run.status).toBe("COMPLETED");
    expect(nodeSteps(child)).toEqual([
      "node.released fact-check",
      "map.started fact-check",
      ...claims.map(() => "item.released fact-check"),
      ...claims.map(() => "item.completed fact-check"),
      "node.completed fact-check",
    ]);
    expect(nodeSteps(state)).toEqual([
      "node.released topic-selection",
      "node.completed topic-selection",
      "child.started fact-check",
      "node.completed fact-check",
      "node.released writing",
      "node.completed writing",
      "node.released review",
      "node.completed review",
    ]);
    const review = bus.emitted("review.requested")[0]?.payload as { input: object } | undefined;
    expect(Object.keys(review?.input ?? {})).toEqual(["writing"]);
  });

  it("a fact check failed on more claims than tolerated cancels review and ends partial with topic selection and writing", async () => {
    const bus = new Bus();
    const runId = newRunId();
    bus.start(runId, "quick-news", `battery recycling ${FAIL_FACT_CHECK_MARKER}`);
    await bus.drain();

    const [failed] = bus.emitted("fact_check.failed");
    expect(failed?.payload).toMatchObject({
      run_id: runId,
      node_id: "fact-check",
      generation: 0,
      item: 0,
      error: { code: "fact_check.rejected", errorClass: "business" },
    });
    expect(bus.agentRun(runId, "fact-check", 0, 0)?.state).toBe("FAILED");
    expect(bus.agentRun(runId, "fact-check", 0, CLAIMS_MAY_FAIL)?.state).toBe("FAILED");
    expect(bus.emitted("review.requested")).toEqual([]);
    const [ended] = bus.ended(runId);
    expect(ended?.type).toBe("workflow.partial");
    expect(ended?.result).toMatchObject({
      status: "PARTIAL",
      completed: ["topic-selection", "writing"],
      cancelled: ["review"],
      failed: [{ node_id: "fact-check", error: { code: "dag.map_failed" } }],
    });
    expect(Object.keys(ended?.result.outputs ?? {}).sort()).toEqual(["topic-selection", "writing"]);
    expect(bus.model.callCount("review")).toBe(0);
  });

  it("shuffled duplicate deliveries of every event change nothing", async () => {
    const runId = newRunId();
    const clean = new Bus();
    const start = clean.start(runId, "quick-news");
    await clean.drain();

    for (const seed of [1, 2, 3]) {
      const noisy = new Bus({ duplicate: true, seed });
      noisy.start(runId, "quick-news");
      await noisy.drain();
      expect(noisy.deadLettered).toEqual([]);
      expect(noisy.state(runId).run).toEqual(clean.state(runId).run);
      expect(noisy.ended(runId)).toEqual(clean.ended(runId));
      expect(noisy.store.log.map((e) => e.event_type).sort()).toEqual(
        clean.store.log.map((e) => e.event_type).sort(),
      );
      for (const role of CONTENT_ROLES)
        expect(noisy.model.callCount(role)).toBe(clean.model.callCount(role));
      expect(noisy.handled.filter((h) => h.status === "duplicate").length).toBeGreaterThan(0);
    }

    // Redeliver everything once more after the run ended: all duplicates, no state touched.
    const before = structuredClone(clean.store.states);
    const log = [...clean.store.log];
    const mark = clean.handled.length;
    for (const e of [start, ...log]) clean.send(e);
    await clean.drain();
    const redelivered = clean.handled.slice(mark);
    expect(redelivered.length).toBeGreaterThan(log.length / 2);
    expect(redelivered.filter((h) => h.status !== "duplicate")).toEqual([]);
    expect(clean.store.states).toEqual(before);
    expect(clean.store.log).toHaveLength(log.length);
  });

  it("re-running from writing after completion re-runs writing and review only, then completes again", async () => {
    const bus = new Bus();
    const runId = newRunId();
    bus.start(runId, "quick-news");
    await bus.drain();
    const first = bus.state(runId);

    bus.send(bus.command("workflow.rerun.requested", runId, { node_id: "writing" }));
    await bus.drain();

    const state = bus.state(runId);
    expect(state.run.generation).toBe(1);
    expect(state.run.status).toBe("COMPLETED");
    const claims = bus.claims(runId);
    expect(bus.model.callCount("topic-selection")).toBe(1);
    expect(bus.model.callCount("fact-check")).toBe(claims.length);
    expect(bus.model.callCount("writing")).toBe(2);
    expect(bus.model.callCount("review")).toBe(2);
    expect(
      bus.emitted("writing.requested").map((e) => (e.payload as { generation: number }).generation),
    ).toEqual([0, 1]);
    expect(bus.emitted("fact_check.requested")).toHaveLength(claims.length);
    // A new generation is a new agent run; the first one is kept.
    expect(bus.agentRun(runId, "writing", 0)?.state).toBe("COMPLETED");
    expect(bus.agentRun(runId, "writing", 1)?.state).toBe("COMPLETED");
    expect(state.run.nodes["fact-check"]).toEqual(first.run.nodes["fact-check"]);
    expect(state.run.nodes.writing?.assigned_generation).toBe(1);
    expect(bus.ended(runId).map((e) => e.type)).toEqual([
      "workflow.completed",
      "workflow.completed",
    ]);
    expect(nodeSteps(state).slice(-4)).toEqual([
      "node.released writing",
      "node.completed writing",
      "node.released review",
      "node.completed review",
    ]);
  });

  it("an invalid model output, once the budget is spent, needs a human and ends the run partial", async () => {
    const bus = new Bus({ maxModelAttempts: 3 });
    bus.model.invalidNext("writing", 3);
    const runId = newRunId();
    bus.start(runId, "quick-news");
    await bus.drain();

    expect(bus.model.callCount("writing")).toBe(3);
    const run = bus.agentRun(runId, "writing");
    expect(run?.state).toBe("NEEDS_HUMAN");
    expect(run?.attempt).toBe(3);
    expect(run?.error?.code).toBe("model.invalid_output");
    expect(bus.emitted("writing.failed")[0]?.payload).toMatchObject({
      error: { code: "model.invalid_output" },
    });
    const [ended] = bus.ended(runId);
    expect(ended?.type).toBe("workflow.partial");
    expect(ended?.result).toMatchObject({
      completed: ["fact-check", "topic-selection"],
      failed: [{ node_id: "writing", error: { code: "model.invalid_output" } }],
      cancelled: ["review"],
    });

    // The operator resets the failed node: a new generation, a fresh agent run, and it completes.
    bus.send(bus.command("workflow.reset.requested", runId, { node_id: "writing" }));
    await bus.drain();
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    expect(bus.agentRun(runId, "writing", 1)?.state).toBe("COMPLETED");
    // The agent run that waited for a person is closed: the retry is the new generation's.
    expect(bus.agentRun(runId, "writing", 0)?.state).toBe("CANCELLED");
    expect(bus.ended(runId).map((e) => e.type)).toEqual(["workflow.partial", "workflow.completed"]);
  });

  it("an invalid output of the first node fails the whole run", async () => {
    const bus = new Bus({ maxModelAttempts: 2 });
    bus.model.invalidNext("topic-selection", 2);
    const runId = newRunId();
    bus.start(runId, "long-form");
    await bus.drain();
    expect(bus.emitted("topic_selection.failed")[0]?.payload).toMatchObject({
      error: { code: "model.invalid_output" },
    });
    const [ended] = bus.ended(runId);
    expect(ended?.type).toBe("workflow.failed");
    expect(ended?.result).toMatchObject({
      status: "FAILED",
      completed: [],
      cancelled: ["fact-check", "review", "writing"],
    });
  });

  it("retries a transient model error through redelivery, and fails the node once the budget is spent", async () => {
    const bus = new Bus();
    bus.model.failNext("writing", new TransientError("model.throttled", "slow down"));
    const runId = newRunId();
    bus.start(runId, "quick-news");
    await bus.drain();
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    expect(bus.agentRun(runId, "writing")?.history.map((h) => h.trigger)).toEqual([
      "TaskAssigned",
      "DependenciesSatisfied",
      "RetryScheduled",
      "DependenciesSatisfied",
      "TaskCompleted",
    ]);

    const exhausted = new Bus();
    for (let i = 0; i < 3; i++)
      exhausted.model.failNext("review", new TransientError("model.unavailable", "down"));
    const other = newRunId();
    exhausted.start(other, "quick-news");
    await exhausted.drain();
    expect(exhausted.model.callCount("review")).toBe(3);
    expect(exhausted.emitted("review.failed")[0]?.payload).toMatchObject({
      error: { code: "model.unavailable", errorClass: "transient" },
    });
    expect(exhausted.ended(other)[0]?.type).toBe("workflow.partial");
  });

  it("an expired lease of a request still in the queue sends it again; the agent answers once, the run completes", async () => {
    const bus = new Bus();
    const runId = newRunId();
    bus.start(runId, "quick-news");
    await bus.drain((d) => d.group === "orchestrator");
    // The request waits in the agent's queue past its lease: the outcome is unknown.
    bus.send(
      bus.command("node.lease.expired", runId, { node_id: "topic-selection", generation: 0 }),
    );
    await bus.drain((d) => d.group === "orchestrator");
    expect(bus.state(runId).run.nodes["topic-selection"]?.state).toBe("RUNNING");
    const requests = bus.emitted("topic_selection.requested");
    expect(requests).toHaveLength(2);
    // The same assignment, marked as sent again (its agent reads the stream before it).
    expect(requests[1]?.payload).toEqual({
      ...(requests[0]?.payload as object),
      redelivered: true,
    });

    await bus.drain();
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    // One model call; the repeated request was answered from the agent run's record, and the
    // second answer did not count.
    expect(bus.model.callCount("topic-selection")).toBe(1);
    expect(bus.emitted("topic_selection.completed")).toHaveLength(2);
    expect(bus.emitted("fact_check.requested")).toHaveLength(bus.claims(runId).length);
    expect(bus.ended(runId).map((e) => e.type)).toEqual(["workflow.completed"]);
  });

  it("an expired lease with no redelivery left fails a running node, and the lost worker's late result is ignored", async () => {
    const bus = new Bus({ orchestrator: referenceOrchestrator({ maxLeaseRedeliveries: 0 }) });
    const runId = newRunId();
    bus.start(runId, "quick-news");
    await bus.drain((d) => d.group === "orchestrator");
    expect(bus.state(runId).run.nodes["topic-selection"]?.state).toBe("RUNNING");

    bus.send(
      bus.command("node.lease.expired", runId, { node_id: "topic-selection", generation: 0 }),
    );
    await bus.drain((d) => d.group === "orchestrator");
    const state = bus.state(runId);
    expect(state.run.nodes["topic-selection"]).toMatchObject({
      state: "FAILED",
      error: { code: "agent_run.lease_expired", error_class: "transient" },
    });
    expect(bus.ended(runId).map((e) => e.type)).toEqual(["workflow.failed"]);

    // The worker that lost its lease finishes anyway: the DAG ignores the completion.
    const logged = bus.store.log.length;
    await bus.drain();
    expect(bus.emitted("topic_selection.completed")).toHaveLength(1);
    expect(bus.store.log).toHaveLength(logged + 1);
    expect(bus.state(runId)).toEqual(state);
  });

  it("a second start of the same run is a no-op", async () => {
    const bus = new Bus();
    const runId = newRunId();
    const first = bus.start(runId, "quick-news");
    await bus.drain();
    const states = structuredClone(bus.store.states);
    const logged = bus.store.log.length;

    bus.send(first); // the same message again: an inbox duplicate
    bus.start(runId, "long-form"); // a new message for the same run: ignored
    await bus.drain();
    expect(bus.handled.slice(-2).map((h) => h.status)).toEqual(["duplicate", "applied"]);
    expect(bus.store.log).toHaveLength(logged);
    // The run is as it was; only the run's record of the messages it handled has the new one.
    const before = states.get(`dag_run#${runId}`);
    const after = bus.store.states.get(`dag_run#${runId}`);
    expect(after?.data).toEqual(before?.data);
    expect(after?.version).toBe(before?.version);
    expect(Object.keys(after?.gate?.recent ?? {})).toHaveLength(
      Object.keys(before?.gate?.recent ?? {}).length + 1,
    );
  });

  it("refuses an unknown workflow, and a rerun, reset or release of an unknown run or node", async () => {
    const bus = new Bus();
    const runId = newRunId();
    bus.start(runId, "deep-dive");
    await bus.drain();
    const rejected = () => bus.emitted("workflow.rejected").map((e) => e.payload);
    expect(rejected()).toEqual([
      expect.objectContaining({ run_id: runId, request: "start", code: "workflow.unknown_kind" }),
    ]);
    expect(bus.handled.at(-1)?.status).toBe("rejected");

    // The run id is still free: a valid start goes ahead.
    bus.start(runId, "quick-news");
    await bus.drain();
    expect(bus.state(runId).run.status).toBe("COMPLETED");

    const unknown = newRunId();
    bus.send(bus.command("workflow.rerun.requested", unknown, { node_id: "writing" }));
    bus.send(bus.command("workflow.reset.requested", runId, { node_id: "writing" }));
    bus.send(bus.command("workflow.rerun.requested", runId, { node_id: "illustration" }));
    bus.send(bus.command("workflow.release.requested", unknown, {}));
    await bus.drain();
    expect(rejected().slice(1)).toEqual([
      expect.objectContaining({ run_id: unknown, request: "rerun", code: "workflow.unknown_run" }),
      expect.objectContaining({ request: "reset", code: "workflow.reset_not_failed" }),
      expect.objectContaining({ request: "rerun", code: "dag.unknown_node" }),
      expect.objectContaining({
        run_id: unknown,
        request: "release",
        code: "workflow.unknown_run",
      }),
    ]);
    expect(bus.deadLettered).toEqual([]);
  });

  it("dead-letters an operator command whose aggregate is not the run it names", async () => {
    const bus = new Bus();
    const runId = newRunId();
    const command = bus.command("workflow.rerun.requested", runId, { node_id: "writing" });
    bus.send({ ...command, aggregate: { type: "dag_run", id: newRunId(), version: 0 } });
    await bus.drain();
    expect(bus.deadLettered).toEqual([
      {
        group: "orchestrator",
        type: "workflow.rerun.requested",
        code: "workflow.aggregate_mismatch",
      },
    ]);
  });

  it("holds new work while an agent's queue is deep, and releases it on request", async () => {
    let writingDepth = 500;
    const gated = referenceOrchestrator({
      queueDepth: (groups) =>
        Object.fromEntries(groups.map((g) => [g, g === "writing" ? writingDepth : 0])),
      queueDepthThreshold: 100,
    });
    const bus = new Bus({ orchestrator: gated });
    const runId = newRunId();
    bus.start(runId, "quick-news");
    await bus.drain();
    let state = bus.state(runId);
    expect(state.run.status).toBe("RUNNING");
    expect(state.run.nodes.writing?.state).toBe("READY");
    expect(state.held).toEqual([{ node_id: "writing", role: "writing", reason: "queue_depth" }]);

    writingDepth = 0;
    bus.send(bus.command("workflow.release.requested", runId, {}));
    await bus.drain();
    state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.held).toEqual([]);
  });

  it("subscribes the orchestrator to every outcome of every content role, as the stack's table declares them", () => {
    for (const role of CONTENT_ROLES) {
      const agent = contentAgentRole({ role, model: referenceLocalModel() });
      expect(agent.group).toBe(role);
      for (const type of agent.subscriptions) expect(registry.has(type)).toBe(true);
    }
    const subscriptions = orchestratorSubscriptions(REFERENCE_STEP_ROLES);
    for (const type of subscriptions) expect(registry.has(type)).toBe(true);
    for (const role of CONTENT_ROLES) {
      const { completed, failed } = contentEventTypes(role);
      expect(subscriptions).toEqual(expect.arrayContaining([completed, failed]));
    }
    // The hub's own list names no application's types.
    expect(ORCHESTRATOR_SUBSCRIPTIONS).not.toContain("review.failed");
    expect(agentRunKey("run_01J8ZK4Q0R3V9W6X2Y5Z7A8B9C", "writing", 0)).toMatch(/^arun_[a-p]{32}$/);
  });
});
