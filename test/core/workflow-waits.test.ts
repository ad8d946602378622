import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { WaitSpec } from "../../functions/core/dag/definition";
import { defineWorkflow } from "../../functions/core/dag/graph";
import type { RolePorts } from "../../functions/core/integration";
import { buildRole, defineStepModule } from "../../functions/core/role-module";
import { stepRolesOf } from "../../functions/core/steps";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import type { Envelope } from "../../schemas";
import type { StepRequested } from "../../schemas/events/step";
import type { WorkflowRejected } from "../../schemas/events/workflow";
import * as z from "../../schemas/zod";
import { Bus } from "./workflow-bus";

/**
 * Wait nodes run by the orchestrator, on the in-memory bus through the pipeline every consumer
 * runs: a step, then a wait (a timer, or a signal with a deadline), then a step. The wait's time
 * joins the run's due time, and the sweeper reports it as it reports leases.
 */

const noter = defineStepModule({
  group: "noter",
  entry: "test/core/workflow-waits.test.ts",
  steps: {
    input: z.looseObject({}),
    output: z.looseObject({}),
    run: () => (_input: unknown, context) => ({ noted: context.nodeId }),
  },
});

const HOUR = 3600;
/** 11:00 UTC on the bus clock's first day (it starts at 10:00 UTC). */
const UNTIL = "2026-09-01T13:00:00+02:00";

const paused = (name: string, wait: WaitSpec) =>
  defineWorkflow({
    name,
    version: 1,
    nodes: [
      { id: "first", role: "noter" },
      { id: "pause", wait },
      { id: "after", role: "noter" },
    ],
    edges: [
      { from: "first", to: "pause" },
      { from: "pause", to: "after" },
    ],
  });

function busWith() {
  const orchestrator = orchestratorRole({
    stepRoles: stepRolesOf([...contentAgentModules, noter]),
    workflows: [
      paused("timed", { seconds: 60 }),
      paused("gated", { signal: "approved", seconds: HOUR }),
      paused("until", { until: UNTIL }),
    ],
  });
  return new Bus({ orchestrator, roles: [buildRole(noter, {} as RolePorts)] });
}

const inTenant = (envelope: Envelope, tenant: string | undefined): Envelope => {
  const { tenant_id: _none, ...rest } = envelope;
  return tenant === undefined ? rest : { ...rest, tenant_id: tenant };
};

/** A run of `workflow` in `tenant`, carried up to its wait node. */
async function waiting(bus: Bus, workflow: string, tenant?: string): Promise<string> {
  const runId = `run_${ulid()}`;
  const request = { topic_hint: "waits" };
  const start = bus.command("workflow.start.requested", runId, { workflow, request });
  bus.send(inTenant(start, tenant));
  await bus.drain();
  expect(bus.state(runId).run.nodes.pause?.state).toBe("RUNNING");
  return runId;
}

const signal = (bus: Bus, runId: string, key: string, payload?: Record<string, unknown>) =>
  bus.command("workflow.signal.requested", runId, {
    signal: key,
    ...(payload === undefined ? {} : { payload }),
    requested_by: "ops",
  });

const dueAtOf = (bus: Bus, runId: string) => bus.store.dueIndex.get(`dag_run#${runId}`)?.dueAt;
const afterInput = (bus: Bus) =>
  bus
    .emitted("noter.node.requested")
    .map((e) => e.payload as StepRequested)
    .find((r) => r.node_id === "after")?.input;

describe("a wait node on a timer", () => {
  it("keeps its time as the run's due time, without a lease, and completes when the sweeper reports it", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "timed");
    const state = bus.state(runId);
    // Sixty seconds from when the orchestrator started the wait.
    const started = state.timeline.find((e) => e.event === "wait.started")?.at ?? "";
    const due = new Date(Date.parse(started) + 60_000).toISOString();
    expect(state.timers).toEqual({ pause: { generation: 0, due_at: due } });
    expect(state.leases?.pause).toBeUndefined();
    expect(dueAtOf(bus, runId)).toBe(due);
    expect(bus.sweep()).toEqual([]);

    bus.clock.advance(60_000);
    const reports = bus.sweep();
    expect(reports.map((e) => [e.event_type, e.payload])).toEqual([
      ["node.wait.expired", { run_id: runId, node_id: "pause", generation: 0, due_at: due }],
    ]);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const ended = bus.state(runId);
    expect(ended.run.status).toBe("COMPLETED");
    expect(ended.run.nodes.pause?.output).toEqual({ released_by: "timer" });
    expect(ended.timers).toEqual({});
    expect(afterInput(bus)).toEqual({ pause: { released_by: "timer" } });
  });
});

describe("a wait node's time", () => {
  it("starts again when the node is re-run, and goes when the run is cancelled", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "timed");
    const first = bus.state(runId).timers?.pause;
    bus.clock.advance(30_000);
    bus.send(bus.command("workflow.rerun.requested", runId, { node_id: "pause" }));
    await bus.drain();
    const timer = bus.state(runId).timers?.pause;
    expect(timer?.generation).toBe(1);
    expect(Date.parse(timer?.due_at ?? "")).toBeGreaterThan(Date.parse(first?.due_at ?? ""));
    // The run's due time stays the first assignment's until that passes (never later than any).
    expect(dueAtOf(bus, runId)).toBe(first?.due_at);
    // The first assignment's time passes: nothing is reported, the run is nudged and then due at
    // the re-run's time, when its report goes.
    bus.clock.advance(Date.parse(first?.due_at ?? "") - bus.clock.now().getTime());
    expect(bus.sweep().map((e) => e.event_type)).toEqual(["workflow.release.requested"]);
    await bus.drain();
    expect(dueAtOf(bus, runId)).toBe(timer?.due_at);
    expect(bus.sweep()).toEqual([]);
    bus.clock.advance(Date.parse(timer?.due_at ?? "") - bus.clock.now().getTime());
    const reports = bus.sweep();
    expect(
      reports.map((e) => [e.event_type, (e.payload as { generation: number }).generation]),
    ).toEqual([["node.wait.expired", 1]]);

    // The run is cancelled before the report is taken: the time goes, the report changes nothing.
    bus.send(bus.command("workflow.cancel.requested", runId, { requested_by: "ops" }));
    await bus.drain((d) => d.event.event_type === "workflow.cancel.requested");
    const cancelled = bus.state(runId);
    expect(cancelled.run.status).toBe("CANCELLED");
    expect(cancelled.timers).toEqual({});
    expect(dueAtOf(bus, runId) ?? null).toBeNull();
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId)).toEqual(cancelled);
  });
});

describe("a wait node until a time", () => {
  it("is due at that time, in UTC, and completes then", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "until");
    expect(bus.state(runId).timers?.pause?.due_at).toBe("2026-09-01T11:00:00.000Z");
    bus.clock.advance(Date.parse(UNTIL) - bus.clock.now().getTime() - 1);
    expect(bus.sweep()).toEqual([]);
    bus.clock.advance(1);
    expect(bus.sweep().map((e) => e.event_type)).toEqual(["node.wait.expired"]);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
  });
});

describe("a wait node on a signal", () => {
  it("completes with the signal's payload, and its deadline no longer counts", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "gated");
    expect(bus.state(runId).timers?.pause?.signal).toBe("approved");
    bus.send(signal(bus, runId, "approved", { by: "editor" }));
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const output = { released_by: "signal", signal: "approved", payload: { by: "editor" } };
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.run.nodes.pause?.output).toEqual(output);
    expect(afterInput(bus)).toEqual({ pause: output });
    expect(state.timers).toEqual({});
    bus.clock.advance(HOUR * 1000);
    expect(bus.sweep()).toEqual([]);
  });

  it("a deadline report that crosses the signal changes nothing", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "gated");
    bus.clock.advance(HOUR * 1000);
    expect(bus.sweep().map((e) => e.event_type)).toEqual(["node.wait.expired"]);
    // The signal is taken first, then the report, while the step after the wait runs.
    bus.send(signal(bus, runId, "approved"));
    await bus.drain((d) => d.event.event_type === "workflow.signal.requested");
    const released = bus.state(runId);
    expect(released.run.nodes.pause?.output).toMatchObject({ released_by: "signal" });
    expect(released.run.nodes.after?.state).toBe("RUNNING");
    await bus.drain((d) => d.event.event_type === "node.wait.expired");
    expect(bus.state(runId)).toEqual(released);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
  });

  it("fails with dag.wait_deadline when its deadline passes first", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "gated");
    bus.clock.advance(HOUR * 1000);
    expect(bus.sweep().map((e) => e.event_type)).toEqual(["node.wait.expired"]);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.nodes.pause).toMatchObject({
      state: "FAILED",
      error: { code: "dag.wait_deadline" },
    });
    expect(state.run.nodes.after?.state).toBe("CANCELLED");
    expect(state.run.status).toBe("PARTIAL");
    expect(bus.emitted("workflow.partial")).toHaveLength(1);
  });

  it("records a signal nobody waits for as signal.unmatched and changes nothing else; refuses one for a run never started", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "gated");
    const before = bus.state(runId);
    bus.send(signal(bus, runId, "rejected", { by: "editor" }));
    const unknownRun = `run_${ulid()}`;
    bus.send(signal(bus, unknownRun, "approved"));
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const after = bus.state(runId);
    expect(after.run).toEqual(before.run);
    expect(after.timers).toEqual(before.timers);
    expect(after.timeline.at(-1)).toMatchObject({
      event: "signal.unmatched",
      signal: "rejected",
      cause: "workflow.signal.requested",
    });
    const rejected = bus.emitted("workflow.rejected").map((e) => e.payload as WorkflowRejected);
    expect(rejected).toMatchObject([
      { run_id: unknownRun, request: "signal", code: "workflow.unknown_run" },
    ]);
  });

  it("obeys a signal in the run's tenant only", async () => {
    const bus = busWith();
    const runId = await waiting(bus, "gated", "acme");
    const before = bus.store.log.length;
    for (const tenant of ["globex", undefined])
      bus.send(inTenant(signal(bus, runId, "approved"), tenant));
    await bus.drain();

    expect(bus.deadLettered).toEqual([
      { group: "orchestrator", type: "workflow.signal.requested", code: "dag_run.tenant_mismatch" },
      { group: "orchestrator", type: "workflow.signal.requested", code: "dag_run.tenant_mismatch" },
    ]);
    expect(bus.store.log.length).toBe(before);
    expect(bus.state(runId).run.nodes.pause?.state).toBe("RUNNING");

    bus.send(inTenant(signal(bus, runId, "approved"), "acme"));
    await bus.drain();
    expect(bus.state(runId).run.status).toBe("COMPLETED");
  });
});
