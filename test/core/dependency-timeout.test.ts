import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { startRun } from "../../functions/core/dag/engine";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { dependencyTimeoutOf, onDependencyTimeout } from "../../functions/core/dag/timeout";
import { DEPENDENCY_TIMEOUT } from "../../functions/roles/orchestrator/waits";
import { referenceOrchestrator } from "../support/reference";
import { Bus } from "./workflow-bus";

/**
 * The dependency timeout (seed 001 §2, DependencyTimeout): a node that waits for its inputs past
 * its timeout ends FAILED with `agent_run.dependency_timeout`, and the run ends instead of waiting.
 */

const TIMEOUT_SECONDS = 120;
const error = {
  code: DEPENDENCY_TIMEOUT,
  message: "waited too long",
  error_class: "transient" as const,
};

const chain = defineWorkflow({
  name: "chain",
  version: 1,
  dependencyTimeoutSeconds: 600,
  nodes: [
    { id: "a", role: "r" },
    { id: "b", role: "r", dependencyTimeoutSeconds: 30 },
    { id: "c", role: "r", degrade: "empty" },
    { id: "d", role: "r" },
  ],
  edges: [
    { from: "a", to: "b" },
    { from: "a", to: "c" },
    { from: "b", to: "d" },
  ],
});

describe("onDependencyTimeout (DAG)", () => {
  it("takes the node's timeout, else the workflow's, else the default", () => {
    expect(dependencyTimeoutOf(chain, "b")).toBe(30);
    expect(dependencyTimeoutOf(chain, "a")).toBe(600);
    const bare = defineWorkflow({ name: "bare", version: 1, nodes: [{ id: "x", role: "r" }] });
    expect(dependencyTimeoutOf(bare, "x", 42)).toBe(42);
  });

  it("fails a waiting node, cancels what depends on it, degrades under degrade: empty", () => {
    const started = startRun(chain, "run_1", {});
    expect(started.run.nodes.a?.state).toBe("RUNNING");
    const b = onDependencyTimeout(started.run, chain, "b", error);
    expect(b.run.nodes.b).toMatchObject({ state: "FAILED", error });
    expect(b.run.nodes.d?.state).toBe("CANCELLED");
    expect(b.events.map((e) => e.type)).toEqual(["node.failed", "node.cancelled"]);
    const c = onDependencyTimeout(b.run, chain, "c", error);
    expect(c.run.nodes.c).toMatchObject({ state: "DEGRADED", output: {} });
    expect(c.run.status).toBe("RUNNING"); // a is still running
  });

  it("changes nothing for a node that no longer waits", () => {
    const started = startRun(chain, "run_1", {});
    const none = onDependencyTimeout(started.run, chain, "a", error);
    expect(none.run).toEqual(started.run);
    expect(none.events).toEqual([]);
  });
});

describe("dependency timeout in the orchestrator", () => {
  it("fails the nodes whose inputs never came, and the run ends when the late input does", async () => {
    const bus = new Bus({
      orchestrator: referenceOrchestrator({ dependencyTimeoutSeconds: TIMEOUT_SECONDS }),
    });
    const runId = `run_${ulid()}`;
    bus.start(runId, "quick-news");
    // The topic-selection agent does not take its request: nothing downstream gets its input.
    const stalled = (d: { event: { event_type: string } }) =>
      d.event.event_type !== "topic_selection.requested";
    await bus.drain(stalled);
    const waiting = bus.state(runId);
    expect(Object.keys(waiting.waits ?? {}).sort()).toEqual(["fact-check", "review", "writing"]);
    expect(bus.sweep()).toEqual([]);

    bus.clock.advance(TIMEOUT_SECONDS * 1000);
    const reports = bus.sweep();
    expect(
      reports.map((e) => `${e.event_type} ${(e.payload as { node_id: string }).node_id}`),
    ).toEqual([
      "node.dependency.expired fact-check",
      "node.dependency.expired review",
      "node.dependency.expired writing",
    ]);
    await bus.drain(stalled);
    const timedOut = bus.state(runId);
    expect(timedOut.run.nodes["fact-check"]).toMatchObject({
      state: "FAILED",
      error: { code: DEPENDENCY_TIMEOUT, error_class: "transient" },
    });
    expect(timedOut.run.nodes["fact-check"]?.error?.message).toContain("topic-selection");
    // Review depends on the failed fact check; writing, beside it, timed out on its own.
    expect(timedOut.run.nodes.review?.state).toBe("CANCELLED");
    expect(timedOut.run.nodes.writing).toMatchObject({
      state: "FAILED",
      error: { code: DEPENDENCY_TIMEOUT },
    });
    expect(timedOut.waits).toEqual({});
    expect(timedOut.run.status).toBe("RUNNING");

    await bus.drain();
    const ended = bus.state(runId);
    expect(ended.run.status).toBe("PARTIAL");
    expect(bus.ended(runId).map((e) => e.type)).toEqual(["workflow.partial"]);
    expect(bus.emitted("fact_check.requested")).toEqual([]);
    expect(bus.emitted("writing.requested")).toEqual([]);
  });

  it("a report for a node released meanwhile changes nothing", async () => {
    const bus = new Bus({
      orchestrator: referenceOrchestrator({ dependencyTimeoutSeconds: TIMEOUT_SECONDS }),
    });
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain((d) => d.event.event_type !== "topic_selection.requested");
    bus.clock.advance(TIMEOUT_SECONDS * 1000);
    const reports = bus.sweep().filter((e) => e.event_type === "node.dependency.expired");
    await bus.drain((d) => d.event.event_type !== "node.dependency.expired");
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    const before = structuredClone(bus.state(runId));
    expect(reports).toHaveLength(3);
    await bus.drain();
    expect(bus.state(runId)).toEqual(before);
  });
});
