import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { Bus } from "./workflow-bus";

/**
 * A node whose agent run ended NEEDS_HUMAN (the model never answered in shape), resolved by an
 * operator with `workflow.resolve.requested`: the orchestrator checks the output against the
 * node's role, the node counts as COMPLETED with it, the nodes below it run, and the agent run that
 * waited for a person ends COMPLETED (HumanResolved).
 */

const OPERATOR = { requested_by: "alice", reason: "wrote it by hand" };
const written = { title: "Storage in cities", body: "Batteries, by hand." };

async function needsHuman(): Promise<{ bus: Bus; runId: string }> {
  const bus = new Bus({ maxModelAttempts: 2 });
  bus.model.invalidNext("writing", 2);
  const runId = `run_${ulid()}`;
  bus.start(runId, "quick-news");
  await bus.drain();
  expect(bus.agentRun(runId, "writing")?.state).toBe("NEEDS_HUMAN");
  expect(bus.state(runId).run.status).toBe("PARTIAL");
  return { bus, runId };
}

const rejected = (bus: Bus) => bus.emitted("workflow.rejected").map((e) => e.payload);

describe("resolving a NEEDS_HUMAN node", () => {
  it("completes the node with the supplied output, runs review once, and ends the agent run's wait", async () => {
    const { bus, runId } = await needsHuman();
    const writingCalls = bus.model.callCount("writing");
    bus.send(
      bus.command("workflow.resolve.requested", runId, {
        node_id: "writing",
        output: written,
        ...OPERATOR,
      }),
    );
    await bus.drain();

    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.run.nodes.writing).toMatchObject({ state: "COMPLETED", output: written });
    expect(bus.model.callCount("writing")).toBe(writingCalls);
    expect(bus.model.callCount("review")).toBe(1);
    const review = bus.emitted("review.requested").at(-1)?.payload as { input: unknown };
    expect(review.input).toMatchObject({ writing: written });
    expect(bus.agentRun(runId, "writing", 0)?.state).toBe("COMPLETED");
    expect(bus.agentRun(runId, "writing", 0)?.history.at(-1)?.trigger).toBe("HumanResolved");
    expect(bus.ended(runId).map((e) => e.type)).toEqual(["workflow.partial", "workflow.completed"]);
    expect(bus.deadLettered).toEqual([]);
  });

  it("is idempotent: a repeated resolve is refused and changes nothing", async () => {
    const { bus, runId } = await needsHuman();
    const command = { node_id: "writing", output: written, ...OPERATOR };
    bus.send(bus.command("workflow.resolve.requested", runId, command));
    await bus.drain();
    const logged = bus.store.log.length;
    const state = structuredClone(bus.state(runId));

    bus.send(bus.command("workflow.resolve.requested", runId, command));
    await bus.drain();
    expect(rejected(bus)).toEqual([
      expect.objectContaining({ request: "resolve", code: "workflow.resolve_not_failed" }),
    ]);
    expect(bus.store.log.length).toBe(logged + 1); // the rejection only
    expect(bus.state(runId)).toEqual(state);
    expect(bus.model.callCount("review")).toBe(1);
  });

  it("refuses an output that does not fit the node's role, and leaves the node FAILED", async () => {
    const { bus, runId } = await needsHuman();
    const before = structuredClone(bus.state(runId));
    bus.send(
      bus.command("workflow.resolve.requested", runId, {
        node_id: "writing",
        output: { title: "no body" },
        ...OPERATOR,
      }),
    );
    bus.send(
      bus.command("workflow.resolve.requested", runId, {
        node_id: "illustration",
        output: written,
        ...OPERATOR,
      }),
    );
    await bus.drain();
    expect(rejected(bus)).toEqual([
      expect.objectContaining({
        request: "resolve",
        node_id: "writing",
        code: "workflow.invalid_output",
        message: expect.stringContaining("body"),
      }),
      expect.objectContaining({ request: "resolve", code: "dag.unknown_node" }),
    ]);
    expect(bus.state(runId)).toEqual(before);
    expect(bus.agentRun(runId, "writing", 0)?.state).toBe("NEEDS_HUMAN");
  });

  it("a reset instead ends the NEEDS_HUMAN agent run CANCELLED and retries under a new generation", async () => {
    const { bus, runId } = await needsHuman();
    bus.send(bus.command("workflow.reset.requested", runId, { node_id: "writing" }));
    await bus.drain();
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    expect(bus.agentRun(runId, "writing", 0)?.state).toBe("CANCELLED");
    expect(bus.agentRun(runId, "writing", 1)?.state).toBe("COMPLETED");
  });
});
