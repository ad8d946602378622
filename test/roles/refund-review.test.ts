import { describe, expect, it } from "vitest";
import { summarizeAgentRun } from "../../functions/core/agent/agent-role";
import type { StoredState } from "../../functions/core/ports";
import { planSweep } from "../../functions/core/sweeper";
import { stepDecision } from "../../lib/operator/agent-actions";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import { type Envelope, registry } from "../../schemas";
import { CONVERSATION, RUN, refundDesk, TASK } from "./refund-desk";

describe("the refund agent (seed 000 §10)", () => {
  it("answers a refund question: looks the order up, refunds it once, cancelled first", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Where is my refund?");
    await desk.drain();
    const journal = await desk.journal();
    expect(journal?.status).toBe("COMPLETED");
    expect(journal?.totals).toMatchObject({ model_turns: 3, tool_calls: 3, refused_calls: 0 });
    const [completed] = desk.facts("refund.review.completed");
    expect(completed?.payload).toMatchObject({
      decision: "approved",
      order_id: "456",
      amount_cents: 3450,
    });
    expect(desk.facts("refund.approved")).toHaveLength(1);
    expect(desk.payments.refundsByOrder().get("456")).toBe(1);
    expect((await desk.orders.get("456"))?.status).toBe("cancelled");
    // Every fact of the review is ordered with the customer's conversation.
    expect(completed?.order_key).toBe(CONVERSATION);
    // Reply generation is asked to tell the customer, with the order as it is now.
    const [reply] = desk.facts("reply.generation.requested");
    expect(reply?.payload).toMatchObject({
      intent: "refund",
      order_id: "456",
      order: { status: "cancelled" },
      refund_review: { decision: "approved", amount_cents: 3450 },
    });
    expect(reply?.order_key).toBe(CONVERSATION);
  });

  it("answers a question about a refund the shop already has, and refunds nothing", async () => {
    const desk = refundDesk();
    await desk.ask("123", "Has the refund for order 123 gone through?");
    await desk.drain();
    const [completed] = desk.facts("refund.review.completed");
    expect(completed?.payload).toMatchObject({
      decision: "answered",
      reason: "Your refund of 49.99 USD was submitted on 2026-08-31.",
    });
    expect(desk.facts("refund.approved")).toEqual([]);
    expect(desk.facts("refund.rejected")).toEqual([]);
    expect(desk.payments.calls).toBe(0);
    expect((await desk.orders.get("123"))?.status).toBe("returned");
    expect(desk.facts("reply.generation.requested")).toHaveLength(1);
  });

  it("shows each model turn and tool call under the task, in the step commands", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Where is my refund?");
    await desk.drain();
    const done = desk
      .facts("refund_review.step.requested")
      .map((e) => e.payload as { done: Record<string, unknown> });
    expect(done.map((p) => p.done.kind)).toEqual([
      "start",
      "model",
      "tool",
      "tool",
      "model",
      "tool",
    ]);
    expect(done[1]?.done).toMatchObject({
      model_run_id: `${RUN}:turn:1`,
      asked: ["get_order", "get_refund_status"],
    });
    expect(done[5]?.done).toMatchObject({
      tool: "issue_refund",
      tool_call_id: "call_2_1",
      key: `${TASK}:${RUN}:2:call_2_1`,
      outcome: "succeeded (run)",
    });
    for (const e of desk.t.emitted) expect(e.task_id).toBe(TASK);
  });

  it("sees only the customer's own orders: another's is not found, and nothing is refunded", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund order 456 please", "cust_alice"); // 456 is Bob's
    await desk.drain();
    expect(desk.facts("refund.rejected")[0]?.payload).toMatchObject({
      reason: "We could not find order 456.",
    });
    expect(desk.payments.calls).toBe(0);
    expect((await desk.orders.get("456"))?.status).toBe("delivered");
    expect(desk.facts("reply.generation.requested")[0]?.payload).not.toHaveProperty("order");
  });

  it("refuses an order in transit, and the customer is told why", async () => {
    const desk = refundDesk();
    await desk.ask("A-1001", "Please refund my shoes");
    await desk.drain();
    const [rejected] = desk.facts("refund.rejected");
    expect(rejected?.payload).toMatchObject({
      order_id: "A-1001",
      reason: expect.stringMatching(/on its way/),
    });
    expect(desk.payments.calls).toBe(0);
    expect((await desk.orders.get("A-1001"))?.status).toBe("shipped");
  });

  it("a crash after the refund applied and before the commit gives exactly one refund", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund please");
    await desk.drain(4); // up to the turn that asks for issue_refund
    const [refundStep] = desk.nextSteps();
    expect((await desk.journal())?.pending.map((p) => p.name)).toEqual(["issue_refund"]);
    // The payment system applies the refund; the worker dies before it can record anything.
    const refund = desk.payments.refund.bind(desk.payments);
    desk.payments.refund = async (request) => {
      await refund(request);
      throw new Error("the worker died");
    };
    await expect(desk.t.deliver(refundStep as Envelope)).rejects.toThrow("the worker died");
    desk.payments.refund = refund;
    // The queue hands the step out again: the record is pending from an earlier attempt, so
    // the key is asked about before anything is called.
    await desk.t.deliver(refundStep as Envelope, { receiveCount: 2 });
    desk.delivered.add(refundStep?.event_id ?? "");
    await desk.drain();
    expect(desk.payments.refunds.size).toBe(1);
    expect(desk.payments.calls).toBe(1);
    expect(desk.facts("refund.approved")).toHaveLength(1);
    const record = await desk.sideEffects.get(`${TASK}:${RUN}:2:call_2_1`);
    expect(record).toMatchObject({ state: "succeeded", attempts: 2 });
  });

  it("a timeout after the refund applied is resolved by a query: succeeded, one refund", async () => {
    const desk = refundDesk();
    desk.payments.failNext("timeout_after");
    await desk.ask("456", "Refund please");
    await desk.drain();
    expect(desk.payments.refunds.size).toBe(1);
    expect(desk.payments.calls).toBe(1);
    const steps = desk
      .facts("refund_review.step.requested")
      .map((e) => (e.payload as { done: { outcome?: string } }).done);
    expect(steps.some((d) => d.outcome === "succeeded (query after timeout)")).toBe(true);
    expect(desk.facts("refund.approved")).toHaveLength(1);
  });

  it("a timeout before the refund applied is found not applied and the refund is made once, same key", async () => {
    const desk = refundDesk();
    desk.payments.failNext("timeout_before");
    await desk.ask("456", "Refund please");
    await desk.drain();
    expect(desk.payments.calls).toBe(2);
    expect([...desk.payments.refunds.keys()]).toEqual([`${TASK}:${RUN}:2:call_2_1`]);
    expect(desk.facts("refund.approved")).toHaveLength(1);
  });

  it("an outcome that cannot be learnt is escalated, never retried under a new key, and a person resolves it", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund please");
    await desk.drain(4);
    const [refundStep] = desk.nextSteps();
    desk.payments.failNext("timeout_after", "query_unknown");
    await expect(desk.t.deliver(refundStep as Envelope)).rejects.toMatchObject({
      code: "tool.outcome_unknown",
    });
    for (let receive = 2; receive <= 5; receive++) {
      desk.payments.failNext("query_unknown");
      const delivery = desk.t.deliver(refundStep as Envelope, { receiveCount: receive });
      if (receive < 5)
        await expect(delivery).rejects.toMatchObject({ code: "tool.outcome_unknown" });
      else await delivery;
    }
    desk.delivered.add(refundStep?.event_id ?? "");
    const waiting = await desk.journal();
    expect(waiting?.status).toBe("NEEDS_HUMAN");
    expect(waiting?.waiting).toMatchObject({
      kind: "outcome",
      tool: "issue_refund",
      key: `${TASK}:${RUN}:2:call_2_1`,
    });
    expect(desk.facts("refund.review.needs_person")[0]?.payload).toMatchObject({
      waiting: "outcome",
      tool: "issue_refund",
    });
    expect(desk.payments.calls).toBe(1);
    expect((await desk.sideEffects.get(`${TASK}:${RUN}:2:call_2_1`))?.state).toBe("unknown");
    // The operator checks the payment system and says it was applied, with its receipt.
    const receipt = [...desk.payments.refunds.values()][0];
    await desk.decide({
      tool_call_id: "call_2_1",
      decision: "applied",
      output: receipt,
      reason: "seen in the PSP",
    });
    await desk.drain();
    expect((await desk.journal())?.status).toBe("COMPLETED");
    expect(desk.facts("refund.approved")).toHaveLength(1);
    expect(desk.payments.calls).toBe(1);
    expect((await desk.sideEffects.get(`${TASK}:${RUN}:2:call_2_1`))?.state).toBe("succeeded");
  });

  it("a refund over the threshold waits for a person; approved, it is made", async () => {
    const desk = refundDesk();
    await desk.ask("A-1002", "I cancelled this jacket, refund it");
    await desk.drain();
    const blocked = await desk.journal();
    expect(blocked?.status).toBe("BLOCKED");
    expect(blocked?.waiting).toMatchObject({
      kind: "approval",
      tool: "issue_refund",
      input: { order_id: "A-1002", amount_cents: 12900 },
    });
    expect(desk.payments.calls).toBe(0);
    expect(desk.facts("refund.review.needs_person")[0]?.payload).toMatchObject({
      waiting: "approval",
    });
    await desk.decide({ tool_call_id: "call_2_1", decision: "approve", reason: "checked" });
    await desk.drain();
    expect(desk.payments.refundsByOrder().get("A-1002")).toBe(1);
    expect(desk.facts("refund.approved")).toHaveLength(1);
    expect(
      (await desk.journal())?.window.some((s) => s.outcome === "approve by ops@example.com"),
    ).toBe(true);
  });

  it("a tenant's run records its tenant, and a person's decision sent by the operator tools stays in it", async () => {
    const desk = refundDesk();
    await desk.ask("A-1002", "I cancelled this jacket, refund it", undefined, "acme");
    await desk.drain();
    const blocked = await desk.journal();
    expect(blocked?.tenant_id).toBe("acme");
    expect(blocked && summarizeAgentRun(blocked)).toMatchObject({
      waiting: "approval",
      tenant: "acme",
    });
    const decided = stepDecision(blocked, RUN, "call_2_1", "approve", { requestedBy: "ops_anna" });
    if (!("command" in decided)) throw new Error(`not decided: ${JSON.stringify(decided)}`);
    const envelope = operatorEnvelope(decided.command);
    if (typeof envelope === "string") throw new Error(envelope);
    expect(envelope.tenant_id).toBe("acme");
    const parsed = registry.parse(envelope);
    if (!parsed.ok) throw new Error(parsed.message);
    const before = desk.t.emitted.length;
    await desk.t.deliver(parsed.envelope);
    await desk.drain();
    const caused = desk.t.emitted.slice(before);
    expect(caused.map((e) => e.event_type)).toContain("refund.approved");
    expect(new Set(caused.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
  });

  it("a rejected refund is not made, and the customer gets the rejection", async () => {
    const desk = refundDesk();
    await desk.ask("A-1002", "Refund it");
    await desk.drain();
    await desk.decide({ tool_call_id: "call_2_1", decision: "reject", reason: "outside policy" });
    await desk.drain();
    expect(desk.payments.calls).toBe(0);
    // The person's address is no business of the customer's: the output guard withholds it from
    // the reason, and the reply that tells it waits for a person's review.
    expect(desk.facts("refund.rejected")[0]?.payload).toMatchObject({
      reason: expect.stringMatching(/reject by \[withheld: other customer data\]: outside policy/),
    });
    expect(desk.facts("reply.generation.requested")[0]?.payload).toMatchObject({
      hold_reason: expect.stringMatching(/^output_guard\.refused: other_customer_data/),
    });
    expect((await desk.orders.get("A-1002"))?.status).toBe("placed");
  });

  it("an approval nobody gives: past its deadline the sweeper's message refuses the call, and the customer is told", async () => {
    const desk = refundDesk({ approvalDeadlineSeconds: 3600 });
    await desk.ask("A-1002", "Refund it");
    await desk.drain();
    // What the sweeper reads: the states the due index lists by then, with their due time.
    const swept = async () => {
      const now = desk.t.clock.now();
      const states = await desk.t.store.loadStates(await desk.t.store.due(now, 10));
      return planSweep(states as StoredState<unknown>[], now, registry);
    };
    // Not due yet: the due index does not list the run, and the sweeper sends nothing.
    expect((await swept()).messages).toEqual([]);
    desk.t.clock.advance(3600 * 1000);
    const due = await swept();
    expect(due.messages.map((m) => m.envelope.event_type)).toEqual([
      "refund_review.decision.requested",
    ]);
    const [deadline] = due.messages;
    expect(deadline?.envelope.payload).toMatchObject({
      decision: "deadline",
      tool_call_id: "call_2_1",
    });
    await desk.t.deliver(deadline?.envelope as Envelope);
    // The same message again (the next sweep) changes nothing.
    await desk.t.deliver(deadline?.envelope as Envelope, { receiveCount: 2 });
    await desk.drain();
    expect(desk.payments.calls).toBe(0);
    expect((await desk.journal())?.window.some((s) => s.outcome === "reject by deadline")).toBe(
      true,
    );
    expect(desk.facts("refund.rejected")[0]?.payload).toMatchObject({
      reason: expect.stringContaining("no decision by"),
    });
  });

  it("refuses a decision the run does not wait for, and says what it waits for", async () => {
    const desk = refundDesk();
    await desk.ask("A-1002", "Refund it");
    await desk.drain();
    await expect(desk.decide({ tool_call_id: "call_9_9", decision: "approve" })).rejects.toThrow(
      /waits for a decision on call_2_1, not call_9_9/,
    );
    await expect(desk.decide({ tool_call_id: "call_2_1", decision: "applied" })).rejects.toThrow(
      /waits for an approval: approve or reject, not applied/,
    );
    expect((await desk.journal())?.status).toBe("BLOCKED");
  });

  it("an unknown tool or bad input gets an error turn and nothing runs", async () => {
    for (const marker of ["[unknown-tool]", "[bad-tool-input]"]) {
      const desk = refundDesk();
      await desk.ask("456", `Refund please ${marker}`);
      await desk.drain(1);
      const journal = await desk.journal();
      expect(journal?.totals.refused_calls, marker).toBe(1);
      expect(journal?.totals.tool_calls, marker).toBe(0);
      const [lastMessage] = await desk.content.getMany((journal?.messages ?? []).slice(-1));
      const results = JSON.parse(lastMessage ?? "{}").toolResults;
      expect(results[0].isError, marker).toBe(true);
      expect(results[0].content.error, marker).toMatch(/Nothing was run/);
      await desk.drain();
      expect(desk.facts("refund.approved"), marker).toHaveLength(1);
    }
  });

  it("a redelivered step never calls the model again", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund please");
    const [first] = desk.nextSteps();
    await desk.t.deliver(first as Envelope);
    expect(desk.model.callCount("refund-review")).toBe(1);
    const again = await desk.t.deliver(first as Envelope, { receiveCount: 2 });
    expect(again.status).toBe("duplicate");
    expect(desk.model.callCount("refund-review")).toBe(1);
  });
});
