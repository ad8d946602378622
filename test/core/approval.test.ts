import { describe, expect, it } from "vitest";
import {
  type ApprovalRequest,
  approvalDue,
  deadlineDecision,
  ruleOnApproval,
} from "../../functions/core/approval";

/** The approval primitive's rule, shared by tool calls, held replies and confirmations. */

const pending: ApprovalRequest = {
  step: "call_1",
  action: "issue_refund",
  input: { order_id: "o_1", amount_cents: 25_000 },
  since: "2026-12-02T10:00:00.000Z",
  deadline: "2026-12-03T10:00:00.000Z",
  onDeadline: "reject",
};
const approved = { verdict: "approve", by: "ana", at: "2026-12-02T11:00:00.000Z" } as const;

describe("ruleOnApproval", () => {
  it("applies a decision on the step pending", () => {
    expect(ruleOnApproval(pending, undefined, "approve", "call_1")).toEqual({ kind: "apply" });
    expect(ruleOnApproval(pending, undefined, "reject", "call_1")).toEqual({ kind: "apply" });
  });

  it("takes the decision already taken, again, as a repeat that changes nothing", () => {
    expect(ruleOnApproval(undefined, approved, "approve", "call_1")).toEqual({
      kind: "repeat",
      taken: approved,
    });
  });

  it("refuses the other decision after one, another step, or nothing pending, saying why", () => {
    expect(ruleOnApproval(undefined, approved, "reject", "call_1")).toEqual({
      kind: "refuse",
      why: "call_1 was already decided: approve by ana",
    });
    expect(ruleOnApproval(pending, undefined, "approve", "call_9")).toEqual({
      kind: "refuse",
      why: "the approval pending is for call_1, not call_9",
    });
    expect(ruleOnApproval(undefined, undefined, "approve", "call_1")).toEqual({
      kind: "refuse",
      why: "no approval is pending",
    });
  });
});

describe("the deadline", () => {
  it("is due at the deadline, not before; none never is", () => {
    expect(approvalDue(pending, new Date("2026-12-03T09:59:59.999Z"))).toBe(false);
    expect(approvalDue(pending, new Date("2026-12-03T10:00:00.000Z"))).toBe(true);
    expect(approvalDue({ ...pending, deadline: undefined }, new Date("2030-01-01"))).toBe(false);
    expect(approvalDue(undefined, new Date("2030-01-01"))).toBe(false);
  });

  it("decides a reject, by `deadline`, naming it", () => {
    const now = new Date("2026-12-03T10:00:01.000Z");
    expect(deadlineDecision(pending, now)).toEqual({
      verdict: "reject",
      by: "deadline",
      reason: "no decision by 2026-12-03T10:00:00.000Z",
      at: now.toISOString(),
    });
  });
});
