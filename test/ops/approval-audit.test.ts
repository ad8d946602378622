import { describe, expect, it } from "vitest";
// The operator tools load the applications' event definitions, as the CLI and the console do.
import "../../lib/operator/actions";
import { approvalAnswered } from "../../lib/operator/audit";

/**
 * The audit record of an approval copies the command's reason only where the command's definition
 * does not declare it personal: a held reply's reason may quote the customer, and the command keeps
 * it sealed under the customer's key, while the audit group's record could not be erased.
 */

const command = (type: string, payload: Record<string, unknown>) => ({
  event_id: "01KB0Q3V9X7T2M4N6P8R0S1W40",
  event_type: type,
  schema_version: 1,
  aggregate: { type: "reply", id: "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y", version: 0 },
  payload,
});

describe("approvalAnswered's reason", () => {
  it("leaves out a held reply's reason, which the command declares personal", () => {
    for (const type of ["reply.approve.requested", "reply.reject.requested"]) {
      const answered = approvalAnswered(command(type, { reason: "the customer said: my address" }));
      expect(answered).toMatchObject({ target: "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y" });
      expect(answered).not.toHaveProperty("reason");
    }
  });

  it("keeps an agent decision's reason, which its command does not declare personal", () => {
    const answered = approvalAnswered(
      command("refund_review.decision.requested", {
        run_id: "arun_1",
        tool_call_id: "call_2_1",
        decision: "approve",
        reason: "within policy",
      }),
    );
    expect(answered).toMatchObject({ target: "arun_1", step: "call_2_1", reason: "within policy" });
  });

  it("leaves out the reason of a command whose definition is unknown here", () => {
    const answered = approvalAnswered({
      ...command("refund_review.decision.requested", {
        run_id: "arun_1",
        decision: "reject",
        reason: "words",
      }),
      schema_version: 99,
    });
    expect(answered).toMatchObject({ decision: "reject" });
    expect(answered).not.toHaveProperty("reason");
  });
});
