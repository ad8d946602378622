import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import {
  CONFIRMATION_REFUSED,
  CONFIRMATION_REQUIRED,
  confirmationApproval,
} from "../../functions/roles/content-agents/confirm";
import { NEEDS_CONFIRMATION_MARKER } from "../../functions/roles/content-agents/local-scripts";
import { summarizeRun } from "../../functions/roles/orchestrator/state";
import type { NodeBlocked } from "../../schemas/events/agent-run";
import type { NodeFailed } from "../../schemas/events/workflow";
import { Bus } from "./workflow-bus";

/**
 * Agent runs as seed 001 §2 describes them, on the in-memory bus: an agent acknowledges a request
 * when it starts (`node.started`, the node RUNNING for the orchestrator), a review that needs an
 * external confirmation goes BLOCKED, and an operator's confirmation, refusal or the sweeper's
 * timeout ends the wait.
 */

const CONFIRM_SECONDS = 600;

async function blockedRun(): Promise<{ bus: Bus; runId: string }> {
  const bus = new Bus({ acknowledge: true, confirmSeconds: CONFIRM_SECONDS });
  const runId = `run_${ulid()}`;
  bus.start(runId, "long-form", `${NEEDS_CONFIRMATION_MARKER} quotes on grid storage`);
  await bus.drain();
  return { bus, runId };
}

const confirm = (bus: Bus, runId: string, answer: "confirmed" | "refused", note?: string) =>
  bus.command("workflow.confirm.requested", runId, {
    node_id: "review",
    answer,
    requested_by: "alice",
    ...(note ? { note } : {}),
  });

describe("acknowledging a request (node.started)", () => {
  it("makes the node RUNNING for the orchestrator before the agent answers", async () => {
    const bus = new Bus({ acknowledge: true });
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain((d) => d.event.event_type !== "topic_selection.completed");

    const state = bus.state(runId);
    const lease = state.leases?.["topic-selection"];
    expect(state.run.nodes["topic-selection"]?.state).toBe("RUNNING");
    expect(lease).toMatchObject({ started: true, started_at: expect.any(String) });
    expect(state.timeline.map((t) => `${t.event} ${t.node_id ?? ""}`.trim())).toEqual([
      "run.started",
      "node.ready topic-selection",
      "node.released topic-selection",
      "node.started topic-selection",
    ]);
    const acks = bus.handled.filter((h) => h.type === "node.started");
    expect(acks).toEqual([{ group: "orchestrator", type: "node.started", status: "applied" }]);

    await bus.drain();
    const ended = bus.state(runId);
    expect(ended.run.status).toBe("COMPLETED");
    const started = (s: typeof ended) =>
      s.timeline.filter((t) => t.event === "node.started").map((t) => t.node_id);
    // Long form's fact check is a child run: its agent acknowledges on the child's run.
    expect(started(ended)).toEqual(["topic-selection", "writing", "review"]);
    const [child] = bus.childRuns(runId, "fact-check");
    expect(started(bus.state(child ?? ""))).toContain("fact-check");
  });

  it("ignores an acknowledgement of an assignment that is no longer running", async () => {
    const bus = new Bus({ acknowledge: true });
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain();
    const before = structuredClone(bus.state(runId));
    const ack = bus.command("node.started", runId, {
      node_id: "writing",
      generation: 0,
      attempt: 1,
      agent: "writing",
      lease_seconds: 60,
    });
    bus.send({ ...ack, event_type: "node.started" });
    await bus.drain();
    expect(bus.state(runId)).toEqual(before);
  });
});

describe("a BLOCKED agent run", () => {
  it("waits for a confirmation: the agent run is BLOCKED with a deadline, the node too", async () => {
    const { bus, runId } = await blockedRun();
    const agentRun = bus.agentRun(runId, "review");
    expect(agentRun?.state).toBe("BLOCKED");
    expect(agentRun?.error?.code).toBe(CONFIRMATION_REQUIRED);
    const blocked = bus.emitted("node.blocked").map((e) => e.payload as NodeBlocked);
    expect(blocked).toHaveLength(1);
    expect(blocked[0]?.confirm_by).toBe(agentRun?.confirm_by);
    expect(Date.parse(blocked[0]?.confirm_by ?? "") - Date.parse(agentRun?.updated_at ?? "")).toBe(
      CONFIRM_SECONDS * 1000,
    );

    const state = bus.state(runId);
    expect(state.run.status).toBe("RUNNING");
    expect(state.run.nodes.review?.state).toBe("RUNNING");
    expect(state.leases?.review?.blocked).toMatchObject({
      confirm_by: blocked[0]?.confirm_by,
      question: blocked[0]?.question,
    });
    expect(state.leases?.review?.blocked?.outcome).toBeUndefined();
    expect(state.timeline.at(-1)).toMatchObject({ event: "node.blocked", node_id: "review" });
    expect(bus.ended(runId)).toEqual([]);
    // Both wait for a person's approval (functions/core/approval.ts): the run is listed so, and
    // the agent run says what it waits for, with the question and the deadline.
    expect(summarizeRun(state).waiting).toBe("approval");
    expect(agentRun && confirmationApproval(agentRun)).toEqual({
      step: "review",
      action: "resume review",
      input: { question: blocked[0]?.question },
      since: agentRun?.updated_at,
      deadline: blocked[0]?.confirm_by,
      onDeadline: "fail",
    });
  });

  it("resumes on an operator's confirmation: the model sees it, the run completes", async () => {
    const { bus, runId } = await blockedRun();
    bus.send(confirm(bus, runId, "confirmed", "the source confirmed by phone"));
    await bus.drain();

    const agentRun = bus.agentRun(runId, "review");
    expect(agentRun?.state).toBe("COMPLETED");
    expect(agentRun?.history.map((h) => h.trigger)).toEqual(
      expect.arrayContaining(["TaskBlocked", "ExternalUnblocked", "TaskCompleted"]),
    );
    expect(bus.model.callCount("review")).toBe(2);
    const confirmation = bus.emitted("review.confirm.requested").map((e) => e.payload);
    expect(confirmation).toEqual([
      expect.objectContaining({ outcome: "confirmed", requested_by: "alice", node_id: "review" }),
    ]);
    expect(confirmation[0]).toHaveProperty("input.writing.title");

    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    const steps = state.timeline.filter((t) => t.node_id === "review").map((t) => t.event);
    expect(steps).toEqual([
      "node.ready",
      "node.released",
      "node.started",
      "node.blocked",
      "node.unblocked",
      "node.started",
      "node.completed",
    ]);
  });

  it("takes an answer only for the wait it was given to (waiting_since)", async () => {
    const { bus, runId } = await blockedRun();
    const since = bus.state(runId).leases?.review?.blocked?.since;
    if (since === undefined) throw new Error("the node is not BLOCKED");
    const to = (waitingSince: string) =>
      bus.command("workflow.confirm.requested", runId, {
        node_id: "review",
        answer: "confirmed",
        requested_by: "alice",
        waiting_since: waitingSince,
      });
    const earlier = new Date(Date.parse(since) - 60_000).toISOString();
    bus.send(to(earlier));
    await bus.drain();
    expect(bus.emitted("workflow.rejected").map((e) => e.payload)).toEqual([
      expect.objectContaining({ request: "confirm", code: "workflow.confirm_stale" }),
    ]);
    expect(bus.agentRun(runId, "review")?.state).toBe("BLOCKED");
    expect(bus.emitted("review.confirm.requested")).toEqual([]);

    bus.send(to(since));
    await bus.drain();
    expect(bus.agentRun(runId, "review")?.state).toBe("COMPLETED");
  });

  it("fails on a refusal, with the operator's words", async () => {
    const { bus, runId } = await blockedRun();
    bus.send(confirm(bus, runId, "refused", "the source withdrew the quote"));
    await bus.drain();

    expect(bus.agentRun(runId, "review")?.state).toBe("FAILED");
    const failed = bus.emitted("review.failed").map((e) => (e.payload as NodeFailed).error);
    expect(failed).toEqual([
      expect.objectContaining({ code: CONFIRMATION_REFUSED, errorClass: "business" }),
    ]);
    expect(failed[0]?.message).toContain("the source withdrew the quote");
    expect(bus.state(runId).run.status).toBe("PARTIAL");
    expect(bus.model.callCount("review")).toBe(1);
  });

  it("fails with agent_run.confirm_timeout when the deadline passes without a confirmation", async () => {
    const { bus, runId } = await blockedRun();
    expect(bus.sweep()).toEqual([]);
    bus.clock.advance(CONFIRM_SECONDS * 1000);
    const reports = bus.sweep();
    expect(reports.map((e) => e.event_type)).toEqual(["node.confirm.expired"]);
    await bus.drain();

    const agentRun = bus.agentRun(runId, "review");
    expect(agentRun?.state).toBe("FAILED");
    expect(agentRun?.history.at(-1)?.trigger).toBe("ExternalConfirmTimeout");
    const state = bus.state(runId);
    expect(state.run.status).toBe("PARTIAL");
    expect(state.run.nodes.review?.error).toMatchObject({ code: "agent_run.confirm_timeout" });

    // A late confirmation finds nothing BLOCKED: refused, nothing changes.
    bus.send(confirm(bus, runId, "confirmed"));
    await bus.drain();
    const rejected = bus.emitted("workflow.rejected").map((e) => e.payload);
    expect(rejected).toEqual([
      expect.objectContaining({ request: "confirm", code: "workflow.confirm_not_blocked" }),
    ]);
    expect(bus.sweep()).toEqual([]);
  });

  it("a repeated request for a BLOCKED assignment answers BLOCKED again, without a model call", async () => {
    const { bus, runId } = await blockedRun();
    const request = bus.emitted("review.requested").at(-1);
    const review = bus.roles.find((r) => r.group === "review");
    const blocked = bus.agentRun(runId, "review");
    if (!request || !review || !blocked) throw new Error("no BLOCKED review");
    const decision = await review.decide(blocked, request, {
      now: bus.clock.now(),
      receiveCount: 1,
      stored: undefined,
      repaired: false,
    });
    expect(bus.model.callCount("review")).toBe(1);
    expect(decision.state).toEqual(blocked);
    expect(decision.emit).toEqual([
      expect.objectContaining({
        type: "node.blocked",
        payload: bus.emitted("node.blocked")[0]?.payload,
      }),
    ]);
  });

  it("a cancelled run ends the BLOCKED agent run CANCELLED", async () => {
    const { bus, runId } = await blockedRun();
    bus.send(bus.command("workflow.cancel.requested", runId, { requested_by: "alice" }));
    await bus.drain();
    expect(bus.state(runId).run.status).toBe("CANCELLED");
    expect(bus.agentRun(runId, "review")?.state).toBe("CANCELLED");
    expect(bus.sweep()).toEqual([]);
  });
});
