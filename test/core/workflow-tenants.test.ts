import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { NEEDS_CONFIRMATION_MARKER } from "../../functions/roles/content-agents/local-scripts";
import type { Envelope } from "../../schemas";
import { referenceOrchestrator } from "../support/reference";
import { Bus } from "./workflow-bus";

/**
 * A workflow run obeys what is sent to it from outside (the operator's commands, the sweeper's
 * reports) in its own tenant only, and what the sweeper sends it carries that tenant: on the
 * in-memory bus, through `consume`, a tenant's content run whose review waits BLOCKED on a
 * confirmation.
 */

const CONFIRM_SECONDS = 600;

const inTenant = (envelope: Envelope, tenant: string | undefined): Envelope => {
  const { tenant_id: _none, ...rest } = envelope;
  return tenant === undefined ? rest : { ...rest, tenant_id: tenant };
};

/** Start `tenant`'s long-form run on the bus (not yet delivered); its run id. */
function startIn(bus: Bus, tenant: string | undefined, topicHint: string): string {
  const runId = `run_${ulid()}`;
  const start = bus.command("workflow.start.requested", runId, {
    workflow: "long-form",
    request: { topic_hint: topicHint },
  });
  bus.send(inTenant(start, tenant));
  return runId;
}

/** `tenant`'s long-form run, its review BLOCKED on a confirmation. */
async function blockedRunOf(tenant: string | undefined) {
  const bus = new Bus({ acknowledge: true, confirmSeconds: CONFIRM_SECONDS });
  const runId = startIn(bus, tenant, `${NEEDS_CONFIRMATION_MARKER} quotes on grid storage`);
  await bus.drain();
  expect(bus.state(runId).run.nodes.review?.state).toBe("RUNNING");
  expect(bus.state(runId).leases?.review?.blocked).toBeDefined();
  return { bus, runId };
}

describe("a command to a workflow run of another tenant", () => {
  it("is dead-lettered as dag_run.tenant_mismatch, naming another tenant or none, and the run is untouched", async () => {
    const { bus, runId } = await blockedRunOf("acme");
    const before = bus.store.log.length;
    const commands = [
      bus.command("workflow.confirm.requested", runId, {
        node_id: "review",
        answer: "confirmed",
        requested_by: "mallory",
      }),
      bus.command("workflow.cancel.requested", runId, { requested_by: "mallory" }),
    ];
    for (const command of commands)
      for (const tenant of ["globex", undefined]) bus.send(inTenant(command, tenant));
    await bus.drain();
    expect(bus.deadLettered).toEqual(
      [
        "workflow.confirm.requested",
        "workflow.confirm.requested",
        "workflow.cancel.requested",
        "workflow.cancel.requested",
      ].map((type) => ({ group: "orchestrator", type, code: "dag_run.tenant_mismatch" })),
    );
    expect(bus.store.log.length).toBe(before);
    const state = bus.state(runId);
    expect(state.run.status).toBe("RUNNING");
    expect(state.leases?.review?.blocked?.outcome).toBeUndefined();
  });
});

describe("the sweeper's messages about a tenant's run", () => {
  it("a confirmation past its deadline: the report carries the run's tenant, and so does all it causes", async () => {
    const { bus, runId } = await blockedRunOf("acme");
    bus.clock.advance(CONFIRM_SECONDS * 1000);
    const before = bus.store.log.length;
    const reports = bus.sweep();
    expect(reports.map((e) => [e.event_type, e.tenant_id])).toEqual([
      ["node.confirm.expired", "acme"],
    ]);
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.status).toBe("PARTIAL");
    const caused = bus.store.log.slice(before);
    expect(caused.map((e) => e.event_type)).toContain("workflow.partial");
    expect(new Set(caused.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
  });

  it("a lease run out: the report and the assignment sent again carry the run's tenant", async () => {
    const bus = new Bus({
      orchestrator: referenceOrchestrator({ queuedLeaseSeconds: 60, maxLeaseRedeliveries: 1 }),
    });
    startIn(bus, "acme", "tides");
    // The request waits in the agent's queue: only the orchestrator takes its messages.
    const toOrchestrator = (d: { group: string }) => d.group === "orchestrator";
    await bus.drain(toOrchestrator);
    bus.clock.advance(60_000);
    const before = bus.store.log.length;
    const reports = bus.sweep();
    expect(reports.map((e) => [e.event_type, e.tenant_id])).toEqual([
      ["node.lease.expired", "acme"],
    ]);
    await bus.drain(toOrchestrator);
    expect(bus.deadLettered).toEqual([]);
    const again = bus.store.log.slice(before);
    expect(again.map((e) => [e.event_type, e.tenant_id])).toEqual([
      ["topic_selection.requested", "acme"],
    ]);
  });
});
