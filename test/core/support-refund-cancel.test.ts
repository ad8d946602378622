import { describe, expect, it } from "vitest";
import type { AgentJournal } from "../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../functions/core/agent/agent-role";
import { refundRunId } from "../../functions/roles/refund-review/refund-agent";
import { clientMessage } from "./fixtures";
import { newConversationId, operatorCommand, supportHarness } from "./support-fixture";

/**
 * A refund question's turn cancelled while its refund waits for approval, through the support
 * groups as the buses connect them: the turn's cancel reaches the refund agent as well as the
 * sender, and an approval given afterwards pays nothing.
 */

describe("a cancelled support turn with a refund awaiting approval", () => {
  it("ends the refund review, and an approval afterwards pays nothing", async () => {
    const h = supportHarness();
    const conversation = newConversationId();
    const message = clientMessage(conversation, "I cancelled order A-1002, please refund it", {
      customer: "cust_alice",
    });
    await h.drain([message]);
    const run = refundRunId(message.task_id);
    const journal = () => h.state<AgentJournal>(AGENT_RUN_AGGREGATE, run);
    expect((await journal())?.status).toBe("BLOCKED");

    await h.drain([
      operatorCommand(
        "support.cancel.requested",
        { type: "delivery", id: message.task_id },
        conversation,
        {
          reason: "the customer called in",
        },
      ),
    ]);
    expect(
      h.log
        .filter((l) => l.type === "support.cancel.requested")
        .map((l) => l.group)
        .sort(),
    ).toEqual(["refund-review", "sender"]);
    expect((await journal())?.status).toBe("CANCELLED");

    const approve = operatorCommand(
      "refund_review.decision.requested",
      { type: AGENT_RUN_AGGREGATE, id: run },
      conversation,
      { run_id: run, tool_call_id: "call_2_1", decision: "approve" },
    );
    await h.drain([approve]);
    expect(h.log.at(-1)).toMatchObject({
      group: "refund-review",
      status: "discarded",
      reason: "cancelled",
    });
    expect((await journal())?.status).toBe("CANCELLED");
    expect(h.emitted.filter((e) => e.event_type === "refund.approved")).toEqual([]);
    expect(h.channel.deliveries()).toEqual([]);
  });
});
