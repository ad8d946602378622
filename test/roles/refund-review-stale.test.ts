import { describe, expect, it } from "vitest";
import type { StoredState } from "../../functions/core/ports";
import { planSweep } from "../../functions/core/sweeper";
import { registry } from "../../schemas";
import { CONVERSATION, NEWER_TASK, refundDesk } from "./refund-desk";

/**
 * A refund review serves one support turn: once the turn is cancelled (`agentbus reply cancel`,
 * `support.cancel.requested`) or superseded (the customer wrote again: a newer turn answers), it
 * refunds nothing more. Its run ends CANCELLED at its next step, the step recorded discarded with
 * the reason, as the sender records the turn's sends; a refund waiting for approval is not paid
 * when someone approves it afterwards. A run that already refunded finishes, so the refund is
 * announced.
 */

describe("a refund review whose turn was superseded", () => {
  it("does not start when the customer wrote again before it was delivered", async () => {
    const desk = refundDesk();
    const start = await desk.requested("456", "Refund please");
    desk.customerWritesAgain();
    const result = await desk.t.deliver(start);
    expect(result).toMatchObject({ status: "discarded", reason: "superseded" });
    expect(desk.model.callCount("refund-review")).toBe(0);
    // No run: the run's stream holds only the fact below.
    expect(await desk.journal()).toBeFalsy();
    expect(desk.payments.calls).toBe(0);
    // The turn says it gets no answer from the review, naming the turn that answers instead.
    expect(desk.facts("support.superseded").map((e) => e.payload)).toEqual([
      { conversation_id: CONVERSATION, superseded_by: NEWER_TASK },
    ]);
  });

  it("stops before issue_refund: the run ends CANCELLED, the step discarded superseded", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund please");
    await desk.drain(4); // up to the turn that asks for issue_refund
    expect((await desk.journal())?.pending.map((p) => p.name)).toEqual(["issue_refund"]);
    desk.customerWritesAgain();
    const [refundStep] = desk.nextSteps();
    const result = await desk.t.deliver(refundStep as never);
    expect(result).toMatchObject({ status: "discarded", reason: "superseded" });
    const journal = await desk.journal();
    expect(journal?.status).toBe("CANCELLED");
    expect(journal?.stop).toMatchObject({ reason: "superseded" });
    desk.delivered.add(refundStep?.event_id ?? "");
    expect(desk.nextSteps()).toEqual([]);
    expect(desk.payments.calls).toBe(0);
    expect((await desk.orders.get("456"))?.status).toBe("delivered");
    expect(desk.facts("refund.approved")).toEqual([]);
    expect(desk.facts("support.superseded").map((e) => e.payload)).toEqual([
      { conversation_id: CONVERSATION, superseded_by: NEWER_TASK },
    ]);
  });

  it("a refund awaiting approval is not paid when approved after the customer wrote again", async () => {
    const desk = refundDesk();
    await desk.ask("A-1002", "I cancelled this jacket, refund it");
    await desk.drain();
    expect((await desk.journal())?.status).toBe("BLOCKED");
    desk.customerWritesAgain();
    const result = await desk.decide({ tool_call_id: "call_2_1", decision: "approve" });
    expect(result).toMatchObject({ status: "discarded", reason: "superseded" });
    await desk.drain();
    expect((await desk.journal())?.status).toBe("CANCELLED");
    expect(desk.payments.calls).toBe(0);
    expect((await desk.orders.get("A-1002"))?.status).toBe("placed");
  });
});

describe("a refund review whose turn was cancelled", () => {
  it("a refund awaiting approval: the cancel ends the run, and an approval afterwards pays nothing", async () => {
    const desk = refundDesk({ approvalDeadlineSeconds: 3600 });
    await desk.ask("A-1002", "I cancelled this jacket, refund it");
    await desk.drain();
    expect((await desk.journal())?.status).toBe("BLOCKED");
    expect((await desk.cancel()).status).toBe("applied");
    const journal = await desk.journal();
    expect(journal?.status).toBe("CANCELLED");
    expect(journal?.stop).toMatchObject({ reason: "cancelled", by: "ops_anna" });
    expect(journal?.waiting).toBeUndefined();
    const approved = await desk.decide({ tool_call_id: "call_2_1", decision: "approve" });
    expect(approved).toMatchObject({ status: "discarded", reason: "cancelled" });
    await desk.drain();
    expect(desk.payments.calls).toBe(0);
    expect((await desk.orders.get("A-1002"))?.status).toBe("placed");
    expect(desk.facts("refund.approved")).toEqual([]);
    // No longer due: the sweeper sends the run no deadline.
    desk.t.clock.advance(3600 * 1000);
    const now = desk.t.clock.now();
    const states = await desk.t.store.loadStates(await desk.t.store.due(now, 10));
    expect(planSweep(states as StoredState<unknown>[], now, registry).messages).toEqual([]);
  });

  it("a run still at work ends at its next step, before issue_refund", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund please");
    await desk.drain(4);
    expect((await desk.cancel()).status).toBe("applied");
    const [refundStep] = desk.nextSteps();
    const result = await desk.t.deliver(refundStep as never);
    expect(result).toMatchObject({ status: "discarded", reason: "cancelled" });
    expect((await desk.journal())?.status).toBe("CANCELLED");
    desk.delivered.add(refundStep?.event_id ?? "");
    expect(desk.nextSteps()).toEqual([]);
    expect(desk.payments.calls).toBe(0);
  });

  it("a cancel that comes before the review: the review never starts", async () => {
    const desk = refundDesk();
    const start = await desk.requested("456", "Refund please");
    expect((await desk.cancel()).status).toBe("applied");
    const result = await desk.t.deliver(start);
    expect(result).toMatchObject({ status: "discarded", reason: "cancelled" });
    expect(desk.model.callCount("refund-review")).toBe(0);
    expect(desk.payments.calls).toBe(0);
  });

  it("a run that already refunded finishes, so the refund is announced", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund please");
    await desk.drain(5); // the refund is made
    expect(desk.payments.calls).toBe(1);
    await desk.cancel();
    desk.customerWritesAgain();
    await desk.drain();
    expect((await desk.journal())?.status).toBe("COMPLETED");
    expect(desk.facts("refund.approved")).toHaveLength(1);
  });

  it("a refund made by a worker that died before its commit is learnt and announced, cancel or not", async () => {
    const desk = refundDesk();
    await desk.ask("456", "Refund please");
    await desk.drain(4);
    const [refundStep] = desk.nextSteps();
    const refund = desk.payments.refund.bind(desk.payments);
    desk.payments.refund = async (request) => {
      await refund(request);
      throw new Error("the worker died");
    };
    await expect(desk.t.deliver(refundStep as never)).rejects.toThrow("the worker died");
    desk.payments.refund = refund;
    await desk.cancel();
    await desk.t.deliver(refundStep as never, { receiveCount: 2 });
    desk.delivered.add(refundStep?.event_id ?? "");
    await desk.drain();
    expect(desk.payments.refunds.size).toBe(1);
    expect((await desk.journal())?.status).toBe("COMPLETED");
    expect(desk.facts("refund.approved")).toHaveLength(1);
  });

  it("a refund whose outcome a person confirms after the cancel is announced; one they say was not made ends the run", async () => {
    for (const decision of ["applied", "not_applied"] as const) {
      const desk = refundDesk();
      await desk.ask("456", "Refund please");
      await desk.drain(4);
      const [refundStep] = desk.nextSteps();
      // The payment system applies the refund, but no answer nor query ever tells: a person must.
      desk.payments.failNext("timeout_after", "query_unknown");
      await desk.t.deliver(refundStep as never).catch(() => undefined);
      for (let receive = 2; receive <= 5; receive++) {
        desk.payments.failNext("query_unknown");
        await desk.t.deliver(refundStep as never, { receiveCount: receive }).catch(() => undefined);
      }
      desk.delivered.add(refundStep?.event_id ?? "");
      expect((await desk.journal())?.status, decision).toBe("NEEDS_HUMAN");
      await desk.cancel();
      const receipt = [...desk.payments.refunds.values()][0];
      await desk.decide({
        tool_call_id: "call_2_1",
        decision,
        ...(decision === "applied" ? { output: receipt } : {}),
      });
      await desk.drain();
      const journal = await desk.journal();
      if (decision === "applied") {
        expect(journal?.status, decision).toBe("COMPLETED");
        expect(desk.facts("refund.approved"), decision).toHaveLength(1);
      } else {
        expect(journal?.status, decision).toBe("CANCELLED");
        expect(desk.facts("refund.review.completed"), decision).toEqual([]);
      }
    }
  });
});
