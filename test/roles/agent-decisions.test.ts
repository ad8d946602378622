import { describe, expect, it } from "vitest";
import type { AgentJournal } from "../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../functions/core/agent/agent-role";
import type { StoredState } from "../../functions/core/ports";
import { planSweep } from "../../functions/core/sweeper";
import { agentWaitOf, stepDecision } from "../../lib/operator/agent-actions";
import { approveCommandLine } from "../../lib/operator/approvals";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import { type Envelope, registry } from "../../schemas";
import { RUN, refundDesk, TASK } from "./refund-desk";

/**
 * A person's decision on an agent run, and the sweeper's deadline, through the pipeline
 * (`consume`), on the refund agent: a refund above the threshold waits for an approval
 * (`call_2_1`). A decision is obeyed in the run's tenant only, everything the run emits after it
 * stays in that tenant, and a decision repeated after its call ran changes nothing.
 */

const HOUR = 3600;

/** The refund agent BLOCKED on the approval of a 129.00 refund, in `tenant`'s run. */
async function blockedRefund(tenant?: string) {
  const desk = refundDesk({ approvalDeadlineSeconds: HOUR });
  await desk.ask("A-1002", "I cancelled this jacket, refund it", "cust_alice", tenant);
  await desk.drain();
  const journal = async () => (await desk.journal()) as AgentJournal;
  expect((await journal()).status).toBe("BLOCKED");
  /**
   * A person's decision on the call, as the operator tools send it, naming `tenantId` and the
   * wait it was given to (`waitingSince`).
   */
  const decide = (decision: string, tenantId?: string, waitingSince?: string) =>
    desk.t.deliver(
      desk.t.message(
        "refund_review.decision.requested",
        {
          run_id: RUN,
          tool_call_id: "call_2_1",
          decision,
          requested_by: "ops_anna",
          ...(waitingSince === undefined ? {} : { waiting_since: waitingSince }),
        } as never,
        { aggregate: { type: AGENT_RUN_AGGREGATE, id: RUN }, taskId: TASK, tenantId },
      ),
    );
  return { t: desk.t, payments: desk.payments, drain: desk.drain, journal, decide };
}

describe("a person's decision is obeyed in the run's tenant only", () => {
  it("an approval naming another tenant, or none, is refused as tenant_mismatch; the run waits on", async () => {
    const desk = await blockedRefund("acme");
    const before = desk.t.emitted.length;
    for (const tenant of ["globex", undefined])
      await expect(desk.decide("approve", tenant), String(tenant)).rejects.toMatchObject({
        errorClass: "permanent",
        code: "agent_run.tenant_mismatch",
        message: expect.stringContaining(`agent_run ${RUN} belongs to tenant acme`),
      });
    await desk.drain();
    expect((await desk.journal()).status).toBe("BLOCKED");
    expect(desk.payments.calls).toBe(0);
    expect(desk.t.emitted.length).toBe(before);

    // The run's own tenant is obeyed, and everything the run emits after it is that tenant's.
    await desk.decide("approve", "acme");
    await desk.drain();
    expect(desk.payments.calls).toBe(1);
    const caused = desk.t.emitted.slice(before);
    expect(caused.map((e) => e.event_type)).toContain("refund.approved");
    expect(new Set(caused.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
  });

  it("a default tenant's run refuses a decision naming a tenant", async () => {
    const desk = await blockedRefund();
    await expect(desk.decide("reject", "acme")).rejects.toMatchObject({
      code: "agent_run.tenant_mismatch",
    });
    expect((await desk.journal()).status).toBe("BLOCKED");
  });

  it("the sweeper's deadline carries the run's tenant, and so does everything it causes", async () => {
    const desk = await blockedRefund("acme");
    desk.t.clock.advance(HOUR * 1000);
    const now = desk.t.clock.now();
    const states = await desk.t.store.loadStates(await desk.t.store.due(now, 10));
    const [deadline] = planSweep(states as StoredState<unknown>[], now, registry).messages;
    expect(deadline?.envelope).toMatchObject({
      event_type: "refund_review.decision.requested",
      tenant_id: "acme",
      payload: { decision: "deadline", tool_call_id: "call_2_1" },
    });
    const before = desk.t.emitted.length;
    await desk.t.deliver(deadline?.envelope as Envelope);
    await desk.drain();
    const caused = desk.t.emitted.slice(before);
    expect(caused.map((e) => e.event_type)).toContain("refund.rejected");
    expect(new Set(caused.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
    expect(desk.payments.calls).toBe(0);
  });
});

describe("the run ids of a tool-using agent", () => {
  it("a person's answer resumes the agent run under a new run id that names the one it resumed", async () => {
    const desk = await blockedRefund();
    const first = desk.t.emitted.filter((e) => e.aggregate.id === RUN || e.run_id !== undefined);
    const [runBefore] = new Set(first.map((e) => e.run_id));
    expect(new Set(first.map((e) => e.run_id)).size).toBe(1);
    expect(runBefore).toMatch(/^agrun_/);
    expect(runBefore).not.toBe(RUN);
    expect(first.filter((e) => e.resumed_from !== undefined)).toEqual([]);
    expect((await desk.journal()).current_run).toBe(runBefore);

    const before = desk.t.emitted.length;
    await desk.decide("approve");
    await desk.drain();
    const caused = desk.t.emitted.slice(before);
    expect(caused.map((e) => e.event_type)).toContain("refund.approved");
    const [runAfter] = new Set(caused.map((e) => e.run_id));
    expect(new Set(caused.map((e) => e.run_id)).size).toBe(1);
    expect(runAfter).toMatch(/^agrun_/);
    expect(runAfter).not.toBe(runBefore);
    // The resume's own step names the run it resumed; the agent run keeps its key.
    expect(caused[0]?.resumed_from).toBe(runBefore);
    expect(caused.slice(1).filter((e) => e.resumed_from !== undefined)).toEqual([]);
    expect(
      new Set(
        caused.filter((e) => e.aggregate.type === AGENT_RUN_AGGREGATE).map((e) => e.aggregate.id),
      ),
    ).toEqual(new Set([RUN]));
    expect((await desk.journal()).current_run).toBe(runAfter);
  });
});

describe("a decision repeated after its call ran", () => {
  it("the same approval again changes nothing; the other decision is refused naming the one taken", async () => {
    const desk = await blockedRefund();
    await desk.decide("approve");
    await desk.drain();
    const done = await desk.journal();
    expect(done.status).toBe("COMPLETED");
    expect(done.pending).toEqual([]);
    expect(desk.payments.calls).toBe(1);
    const before = desk.t.emitted.length;

    const again = await desk.decide("approve");
    expect(again.status).toBe("applied");
    expect(again.steps.flatMap((s) => s.emitted)).toEqual([]);
    expect(await desk.journal()).toMatchObject({ status: "COMPLETED", step: done.step });
    await expect(desk.decide("reject")).rejects.toMatchObject({
      code: "agent.decision_refused",
      message: expect.stringContaining("call_2_1 was already decided: approve by ops_anna"),
    });
    expect(desk.t.emitted.length).toBe(before);
    expect(desk.payments.calls).toBe(1);
  });

  it("a deadline's rejection is remembered as well: a late approval is refused, a late rejection changes nothing", async () => {
    const desk = await blockedRefund();
    desk.t.clock.advance(HOUR * 1000);
    await desk.decide("approve");
    await desk.drain();
    expect((await desk.journal()).status).toBe("COMPLETED");
    await expect(desk.decide("approve")).rejects.toThrow(
      /call_2_1 was already decided: reject by deadline/,
    );
    expect((await desk.decide("reject")).status).toBe("applied");
    expect(desk.payments.calls).toBe(0);
  });
});

describe("the operator's decision on an agent run (agentbus approve|reject <run> --step <call>)", () => {
  const by = { requestedBy: "ops_anna" };

  it("goes in the run's tenant, read from its journal; a --tenant of another is refused", async () => {
    const desk = await blockedRefund("acme");
    const journal = await desk.journal();
    expect(stepDecision(journal, RUN, "call_2_1", "approve", { ...by, tenant: "globex" })).toEqual({
      refused: `run ${RUN} belongs to tenant acme, not globex`,
    });
    for (const tenant of ["acme", undefined]) {
      const decided = stepDecision(journal, RUN, "call_2_1", "approve", { ...by, tenant });
      if (!("command" in decided)) throw new Error(`not decided: ${JSON.stringify(decided)}`);
      expect(operatorEnvelope(decided.command)).toMatchObject({ tenant_id: "acme" });
    }
    const ours = await blockedRefund();
    expect(
      stepDecision(await ours.journal(), RUN, "call_2_1", "reject", { ...by, tenant: "acme" }),
    ).toEqual({ refused: `run ${RUN} belongs to tenant default, not acme` });
  });

  it("after the call ran: the same decision is reported as taken, the other refused naming it", async () => {
    const desk = await blockedRefund();
    await desk.decide("approve");
    await desk.drain();
    const journal = await desk.journal();
    expect(stepDecision(journal, RUN, "call_2_1", "approve", by)).toEqual({
      already: `call_2_1 of ${RUN} was already decided: approve by ops_anna`,
    });
    expect(stepDecision(journal, RUN, "call_2_1", "reject", by)).toEqual({
      refused: `call_2_1 of ${RUN} was already decided: approve by ops_anna`,
    });
  });
});

describe("a decision names the wait it was given to (waiting_since)", () => {
  const by = { requestedBy: "ops_anna" };

  it("one given to another wait on the call is refused as agent.decision_refused; the run waits on", async () => {
    const desk = await blockedRefund();
    const since = (await desk.journal()).waiting?.since ?? "";
    const earlier = new Date(Date.parse(since) - 60_000).toISOString();
    await expect(desk.decide("approve", undefined, earlier)).rejects.toMatchObject({
      errorClass: "permanent",
      code: "agent.decision_refused",
      message: expect.stringContaining(
        `the decision was given to what call_2_1 waited for since ${earlier}; it now waits for an approval of issue_refund call_2_1 since ${since}`,
      ),
    });
    await desk.drain();
    expect((await desk.journal()).status).toBe("BLOCKED");
    expect(desk.payments.calls).toBe(0);
    // The decision given to the wait the run has is obeyed.
    await desk.decide("approve", undefined, since);
    await desk.drain();
    expect((await desk.journal()).status).toBe("COMPLETED");
    expect(desk.payments.calls).toBe(1);
  });

  it("the listed commands name it, and the operator's check fills it in or refuses another", async () => {
    const desk = await blockedRefund();
    const journal = await desk.journal();
    const wait = agentWaitOf(journal);
    if (!wait?.toolCallId) throw new Error("the run waits on no call");
    const view = {
      kind: "tool_call" as const,
      id: RUN,
      stepOption: true,
      step: wait.toolCallId,
      action: wait.tool ?? "?",
      since: wait.since,
      tenant: "default",
    };
    expect(approveCommandLine(view, "reject")).toBe(
      `agentbus reject ${RUN} --step call_2_1 --since ${wait.since}`,
    );
    for (const waitingSince of [undefined, wait.since])
      expect(
        stepDecision(journal, RUN, "call_2_1", "approve", { ...by, waitingSince }),
      ).toMatchObject({ command: { payload: { waiting_since: wait.since } } });
    const earlier = new Date(Date.parse(wait.since) - 1).toISOString();
    expect(
      stepDecision(journal, RUN, "call_2_1", "approve", { ...by, waitingSince: earlier }),
    ).toEqual({
      refused: `run ${RUN} no longer waits for what was answered (call_2_1 waiting since ${earlier}): it now waits on call_2_1 since ${wait.since} (see agentbus approvals)`,
    });
  });
});
