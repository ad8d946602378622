import fc from "fast-check";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { allowPlanRoles } from "../../functions/core/dag/plan";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT, InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import type { IntegrationUses, RolePorts } from "../../functions/core/integration";
import type { Role } from "../../functions/core/role";
import { buildRole, defineStepModule } from "../../functions/core/role-module";
import { stepRolesOf } from "../../functions/core/steps";
import { sideEffects } from "../../functions/integrations/side-effects";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import {
  type OrchestratorState,
  planApprovals,
  summarizeRun,
} from "../../functions/roles/orchestrator/state";
import type { Envelope } from "../../schemas";
import type { WorkflowRejected } from "../../schemas/events/workflow";
import type {
  WorkflowChildApprovalRequested,
  WorkflowChildStartRequested,
} from "../../schemas/events/workflow-child";
import * as z from "../../schemas/zod";
import { Bus } from "./workflow-bus";

/**
 * A plan that names a role that writes (its module uses an integration of access "write") waits
 * for a person's approval before its child run starts: approved, the child runs once; rejected or
 * past its deadline, the node fails; a cancel of the parent ends the wait. A plan that writes
 * nothing runs at once.
 */

/** A step role that records the nodes it ran for; `uses` declares what it may call. */
function stepModule(group: string, answer: () => unknown, uses: IntegrationUses = {}) {
  const calls: string[] = [];
  const module = defineStepModule({
    group,
    entry: "test/core/workflow-plan-approval.test.ts",
    uses,
    steps: {
      input: z.looseObject({}),
      output: z.looseObject({}),
      run: () => async (_input, context) => {
        calls.push(`${context.runId}/${context.nodeId}`);
        return answer();
      },
    },
  });
  return { module, calls };
}

/** The planner's plan runs as the child of node `run`; `after` runs on its outcome. */
const PLAN_FLOW = {
  name: "plan-flow",
  nodes: [
    { id: "planner", role: "planner" },
    { id: "run", workflow: { plan: { node: "planner", path: "plan" } } },
    { id: "after", role: "echo" },
  ],
  edges: [
    { from: "planner", to: "run" },
    { from: "run", to: "after" },
  ],
};

/** A plan naming `stamp`, which writes (it uses the side-effect ledger). */
const WRITING_PLAN = {
  name: "stamp-plan",
  nodes: [
    { id: "look", role: "echo" },
    { id: "stamp", role: "stamp" },
  ],
  edges: [{ from: "look", to: "stamp" }],
};

async function setUp(plan: unknown) {
  const echo = stepModule("echo", () => ({ echoed: true }));
  const stamp = stepModule("stamp", () => ({ stamped: true }), { sideEffects });
  const planner = stepModule("planner", () => ({
    plan: typeof plan === "function" ? plan() : plan,
  }));
  const modules = [echo.module, stamp.module, planner.module];
  const stepRoles = stepRolesOf([...contentAgentModules, ...modules]);
  const registry = new InMemoryWorkflowRegistry();
  await putWorkflow(registry, EVERY_TENANT, PLAN_FLOW, { roles: Object.keys(stepRoles) });
  await allowPlanRoles(registry, "default", ["echo", "stamp"], Object.keys(stepRoles));
  const orchestrator = orchestratorRole({ stepRoles, registry });
  const holder: { bus?: Bus } = {};
  const ports = {
    get store() {
      return holder.bus?.store;
    },
  } as unknown as RolePorts;
  const roles: Role<unknown>[] = modules.map((m) => buildRole(m, ports));
  const bus = new Bus({ orchestrator, roles });
  holder.bus = bus;
  const runId = `run_${ulid()}`;
  bus.start(runId, "plan-flow");
  await bus.drain();
  expect(bus.deadLettered).toEqual([]);
  return { bus, runId, stamp, echo, stepRoles };
}

const starts = (bus: Bus) =>
  bus
    .emitted("workflow.child.start.requested")
    .map((e) => e.payload as WorkflowChildStartRequested);

const childState = (bus: Bus, childRunId: string) =>
  bus.store.states.get(`dag_run#${childRunId}`)?.data as OrchestratorState | null | undefined;

const answer = (bus: Bus, runId: string, verdict: "confirmed" | "refused", note?: string) =>
  bus.command("workflow.confirm.requested", runId, {
    node_id: "run",
    answer: verdict,
    requested_by: "alice",
    ...(note === undefined ? {} : { note }),
  });

/** An answer given to the wait shown as waiting since `since`. */
const answerTo = (bus: Bus, runId: string, verdict: "confirmed" | "refused", since: string) =>
  bus.command("workflow.confirm.requested", runId, {
    node_id: "run",
    answer: verdict,
    requested_by: "alice",
    waiting_since: since,
  });

describe("a plan that asks for a write waits for a person's approval", () => {
  it("says which step roles write: those whose module uses a write integration", async () => {
    const { stepRoles } = await setUp(WRITING_PLAN);
    expect(stepRoles.stamp?.writes).toEqual(["sideEffects"]);
    expect(stepRoles.echo?.writes).toBeUndefined();
    expect(stepRoles.writing?.writes).toBeUndefined();
  });

  it("holds the child until approved, shows the plan, and starts it once however often approved", async () => {
    const { bus, runId, stamp, echo } = await setUp(WRITING_PLAN);
    const waiting = bus.state(runId);
    expect(waiting.run.nodes.run?.state).toBe("RUNNING");
    expect(stamp.calls).toEqual([]);
    expect(echo.calls).toEqual([]);
    const asked = bus.emitted("workflow.child.approval.requested");
    expect(asked).toHaveLength(1);
    const child = (asked[0]?.payload as WorkflowChildApprovalRequested | undefined)?.child_run_id;
    if (child === undefined) throw new Error("no approval asked for");
    expect(childState(bus, child) ?? undefined).toBeUndefined();
    expect(summarizeRun(waiting).waiting).toBe("approval");
    expect(planApprovals(waiting)).toEqual([
      expect.objectContaining({
        step: "run",
        action: "run plan stamp-plan v1",
        onDeadline: "fail",
        input: {
          child_run_id: child,
          plan: {
            name: "stamp-plan",
            version: 1,
            nodes: [
              { id: "look", runs: "echo" },
              { id: "stamp", runs: "stamp" },
            ],
            node_count: 2,
          },
          writes: [{ role: "stamp", integrations: ["sideEffects"] }],
        },
      }),
    ]);

    // The approval, a repeat of it (a second command) and a redelivery of the first.
    const approve = answer(bus, runId, "confirmed", "checked the plan");
    bus.send(approve);
    bus.send(answer(bus, runId, "confirmed"));
    bus.send(approve);
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);

    const approved = starts(bus).filter((s) => s.approval !== undefined);
    expect(approved).toHaveLength(1);
    expect(approved[0]?.approval).toMatchObject({ by: "alice", note: "checked the plan" });
    expect(stamp.calls).toEqual([`${child}/stamp`]);
    expect(echo.calls).toEqual([`${child}/look`, `${runId}/after`]);
    const parent = bus.state(runId);
    expect(parent.run.status).toBe("COMPLETED");
    expect(parent.plan_approvals).toBeUndefined();
    expect(parent.timeline.map((e) => e.event)).toEqual(
      expect.arrayContaining(["node.blocked", "node.unblocked"]),
    );
    expect(childState(bus, child)?.run.status).toBe("COMPLETED");
  });

  it("fails the node when a person rejects the plan, and refuses an approval after it", async () => {
    const { bus, runId, stamp, echo } = await setUp(WRITING_PLAN);
    bus.send(answer(bus, runId, "refused", "not this week"));
    bus.send(answer(bus, runId, "confirmed"));
    await bus.drain();

    const parent = bus.state(runId);
    expect(parent.run.nodes.run?.state).toBe("FAILED");
    expect(parent.run.nodes.run?.error).toEqual({
      code: "workflow.plan_rejected",
      message: "alice rejected the plan stamp-plan v1 of node run: not this week",
      error_class: "business",
    });
    expect(parent.run.nodes.after?.state).toBe("CANCELLED");
    const late = bus.emitted("workflow.rejected").map((e) => e.payload as WorkflowRejected);
    expect(late).toEqual([
      expect.objectContaining({ request: "confirm", code: "workflow.confirm_not_blocked" }),
    ]);
    expect(starts(bus).filter((s) => s.approval !== undefined)).toEqual([]);
    expect(stamp.calls).toEqual([]);
    expect(echo.calls).toEqual([]);
  });

  it("fails the node when nobody approves by its deadline (its dependency timeout)", async () => {
    const { bus, runId, stamp } = await setUp(WRITING_PLAN);
    const deadline = bus.state(runId).plan_approvals?.run?.deadline ?? "";
    expect(bus.sweep()).toEqual([]);
    bus.clock.advance(Date.parse(deadline) + 1000 - bus.clock.now().getTime());
    // `after`, PENDING since the start, has passed its own dependency timeout by then too.
    const reports = bus
      .sweep()
      .map((e) => [e.event_type, (e.payload as { node_id: string }).node_id]);
    expect(reports).toEqual([
      ["node.dependency.expired", "after"],
      ["node.confirm.expired", "run"],
    ]);
    await bus.drain();

    const error = bus.state(runId).run.nodes.run?.error;
    expect(error?.code).toBe("workflow.plan_approval_expired");
    expect(error?.message).toContain(`names roles that write: stamp) by ${deadline}`);
    expect(stamp.calls).toEqual([]);
  });

  it("ends the wait when the parent is cancelled: a late approval is refused, the child never starts", async () => {
    const { bus, runId, stamp } = await setUp(WRITING_PLAN);
    bus.send(bus.command("workflow.cancel.requested", runId, { requested_by: "alice" }));
    await bus.drain();
    bus.send(answer(bus, runId, "confirmed"));
    await bus.drain();

    const parent = bus.state(runId);
    expect(parent.run.status).toBe("CANCELLED");
    expect(planApprovals(parent)).toEqual([]);
    expect(summarizeRun(parent).waiting).toBeUndefined();
    expect(bus.emitted("workflow.rejected").map((e) => e.payload)).toEqual([
      expect.objectContaining({ request: "confirm" }),
    ]);
    expect(starts(bus).filter((s) => s.approval !== undefined)).toEqual([]);
    expect(stamp.calls).toEqual([]);
  });

  it("refuses an approval given to the plan before a re-run: the new plan waits for its own", async () => {
    let plan: unknown = WRITING_PLAN;
    const { bus, runId, stamp } = await setUp(() => plan);
    // Alice is shown the first plan; Bob refuses it and runs the planner again, which now plans
    // three writes.
    const seen = planApprovals(bus.state(runId))[0]?.since;
    if (seen === undefined) throw new Error("no plan waits");
    bus.send(answer(bus, runId, "refused"));
    await bus.drain();
    bus.clock.advance(1000);
    plan = {
      name: "bigger-plan",
      nodes: ["one", "two", "three"].map((id) => ({ id, role: "stamp" })),
      edges: [],
    };
    bus.send(
      bus.command("workflow.rerun.requested", runId, { node_id: "planner", requested_by: "bob" }),
    );
    await bus.drain();
    const now = planApprovals(bus.state(runId))[0];
    expect(now?.action).toBe("run plan bigger-plan v1");
    expect(now?.since).not.toBe(seen);

    // Alice's approval, given to the first plan, starts nothing.
    bus.send(answerTo(bus, runId, "confirmed", seen));
    await bus.drain();
    expect(bus.emitted("workflow.rejected").map((e) => e.payload)).toEqual([
      expect.objectContaining({ request: "confirm", code: "workflow.confirm_stale" }),
    ]);
    expect(planApprovals(bus.state(runId))).toEqual([now]);
    expect(stamp.calls).toEqual([]);

    // An approval of the plan now shown starts it.
    bus.send(answerTo(bus, runId, "confirmed", now?.since ?? ""));
    await bus.drain();
    expect(stamp.calls.map((call) => call.split("/")[1]).sort()).toEqual(["one", "three", "two"]);
  });

  it("runs a plan that writes nothing at once", async () => {
    const { bus, runId, echo } = await setUp({
      name: "look-plan",
      nodes: [{ id: "x", role: "echo" }],
    });
    expect(bus.emitted("workflow.child.approval.requested")).toEqual([]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    expect(echo.calls).toHaveLength(2);
  });
});

type Act = "approve" | "reject" | "again" | "cancel" | "deadline";

/**
 * What the parent's node should come to after `acts`, by the first that decides while it waits:
 * an approval runs the plan, anything else that decides ends it unrun; a repeat decides nothing.
 */
function expectedRun(acts: readonly Act[]): boolean {
  for (const act of acts) {
    if (act === "approve") return true;
    if (act !== "again") return false;
  }
  return false;
}

describe("a plan that writes, whatever a person and the clock do", () => {
  it("runs once after an approval that came first, and never otherwise", async () => {
    const acts = fc.constantFrom<Act>("approve", "reject", "again", "cancel", "deadline");
    await fc.assert(
      fc.asyncProperty(fc.array(acts, { minLength: 1, maxLength: 5 }), async (sequence) => {
        const { bus, runId, stamp } = await setUp(WRITING_PLAN);
        let last: Envelope | undefined;
        for (const act of sequence) {
          if (act === "again") {
            if (last) bus.send(last);
          } else if (act === "deadline") {
            const deadline = bus.state(runId).plan_approvals?.run?.deadline;
            if (deadline) bus.clock.advance(Date.parse(deadline) - bus.clock.now().getTime());
            bus.sweep();
          } else {
            last =
              act === "cancel"
                ? bus.command("workflow.cancel.requested", runId, { requested_by: "alice" })
                : answer(bus, runId, act === "approve" ? "confirmed" : "refused");
            bus.send(last);
          }
          await bus.drain();
        }
        expect(bus.deadLettered).toEqual([]);
        const runs = expectedRun(sequence) ? 1 : 0;
        expect(stamp.calls).toHaveLength(runs);
        expect(starts(bus).filter((s) => s.approval !== undefined)).toHaveLength(runs);
        const decided = sequence.some((act) => act !== "again");
        expect(planApprovals(bus.state(runId))).toHaveLength(decided ? 0 : 1);
      }),
      { numRuns: 40, examples: [[["again"]], [["again", "approve", "again", "reject"]]] },
    );
  });
});
