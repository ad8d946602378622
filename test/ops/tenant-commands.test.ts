import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { NEEDS_CONFIRMATION_MARKER } from "../../functions/roles/content-agents/local-scripts";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import {
  type RunRequest,
  runRequestCommand,
  runRequestProblem,
} from "../../lib/operator/workflow-actions";
import { registry } from "../../schemas";
import { Bus } from "../core/workflow-bus";

/**
 * The operator's commands on a run go in the run's tenant, so that what they cause stays there:
 * on the in-memory bus, a tenant's content run BLOCKED on a confirmation, approved as the CLI and
 * the console approve it (`agentbus approve <run> --step review`).
 */

const CONFIRM: RunRequest = {
  kind: "confirm",
  nodeId: "review",
  answer: "confirmed",
  note: "the source confirmed by phone",
};

async function blockedRunOf(tenant: string | undefined): Promise<{ bus: Bus; runId: string }> {
  const bus = new Bus({ acknowledge: true, confirmSeconds: 600 });
  const runId = `run_${ulid()}`;
  const start = bus.command("workflow.start.requested", runId, {
    workflow: "long-form",
    request: { topic_hint: `${NEEDS_CONFIRMATION_MARKER} quotes on grid storage` },
  });
  bus.send(tenant === undefined ? start : { ...start, tenant_id: tenant });
  await bus.drain();
  return { bus, runId };
}

describe("an operator's approval of a tenant's run", () => {
  it("carries the run's tenant, and everything it causes is that tenant's", async () => {
    const { bus, runId } = await blockedRunOf("acme");
    const state = bus.state(runId);
    expect(state.tenant_id).toBe("acme");
    // The run is listed as waiting for an approval, in its tenant.
    expect(bus.store.summaries.get(`dag_run#${runId}`)).toMatchObject({
      waiting: "approval",
      tenant: "acme",
    });
    expect(runRequestProblem(runId, state, CONFIRM)).toBeUndefined();
    // So are its nodes' agent runs (the one waiting on the confirmation among them).
    const agentRuns = [...bus.store.summaries].filter(([key]) => key.startsWith("agent_run#"));
    expect(agentRuns.length).toBeGreaterThan(0);
    expect(agentRuns.map(([, summary]) => summary.tenant)).toEqual(agentRuns.map(() => "acme"));

    const envelope = operatorEnvelope(runRequestCommand(runId, CONFIRM, "ops_anna", state));
    if (typeof envelope === "string") throw new Error(envelope);
    expect(envelope).toMatchObject({
      event_type: "workflow.confirm.requested",
      tenant_id: "acme",
      payload: { run_id: runId, node_id: "review", answer: "confirmed" },
    });

    const parsed = registry.parse(envelope);
    if (!parsed.ok) throw new Error(parsed.message);
    const before = bus.store.log.length;
    bus.send(parsed.envelope);
    await bus.drain();
    const caused = bus.store.log.slice(before);
    expect(caused.map((e) => e.event_type)).toContain("workflow.completed");
    expect(new Set(caused.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
    expect(bus.store.summaries.get(`dag_run#${runId}`)).toMatchObject({
      status: "COMPLETED",
      tenant: "acme",
    });
  });

  it("is refused when the operator names another tenant (--tenant), whichever the run's", async () => {
    const { bus, runId } = await blockedRunOf("acme");
    expect(runRequestProblem(runId, bus.state(runId), CONFIRM, { tenant: "globex" })).toBe(
      `run ${runId} belongs to tenant acme, not globex`,
    );
    expect(runRequestProblem(runId, bus.state(runId), CONFIRM, { tenant: "acme" })).toBeUndefined();
    const other = await blockedRunOf(undefined);
    expect(
      runRequestProblem(other.runId, other.bus.state(other.runId), CONFIRM, {
        tenant: "acme",
      }),
    ).toBe(`run ${other.runId} belongs to tenant default, not acme`);
  });

  it("names no tenant for a run of the default tenant, nor before the run is read", async () => {
    const { bus, runId } = await blockedRunOf(undefined);
    const state = bus.state(runId);
    expect(state.tenant_id).toBeUndefined();
    expect(bus.store.summaries.get(`dag_run#${runId}`)).not.toHaveProperty("tenant");
    for (const [key, summary] of bus.store.summaries)
      if (key.startsWith("agent_run#")) expect(summary).not.toHaveProperty("tenant");
    const envelope = operatorEnvelope(runRequestCommand(runId, CONFIRM, "ops_anna", state));
    if (typeof envelope === "string") throw new Error(envelope);
    expect(envelope).not.toHaveProperty("tenant_id");
    // Checked offline first (the CLI and the console do), before the run is read: no tenant yet.
    const offline = operatorEnvelope(runRequestCommand(runId, CONFIRM, "ops_anna"));
    expect(offline).not.toHaveProperty("tenant_id");
  });
});
