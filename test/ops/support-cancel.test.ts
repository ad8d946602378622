import { describe, expect, it } from "vitest";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import { cancelCommand, cancelDecision } from "../../lib/operator/support-cancel";

/** The cancel of a support turn, as the CLI checks it before sending (data only). */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const CONV = "conv_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const KEY = `${TASK}:reply:1`;
const command = cancelCommand(TASK, "customer called in", "ops_anna");

describe("cancelDecision", () => {
  it("completes the command with the turn's conversation, its order key", () => {
    const decided = cancelDecision(command, { conversationId: CONV });
    expect(decided).toMatchObject({
      command: {
        conversationId: CONV,
        payload: { conversation_id: CONV, reason: "customer called in" },
      },
    });
    if (!("command" in decided)) throw new Error("expected a command");
    const envelope = operatorEnvelope(decided.command);
    expect(envelope).toMatchObject({
      event_type: "support.cancel.requested",
      aggregate: { type: "delivery", id: TASK, version: 0 },
      order_key: CONV,
      task_id: TASK,
    });
  });

  it("refuses a task with no turn, and a turn whose reply was delivered", () => {
    expect(cancelDecision(command, {})).toEqual({
      refused: `no support turn of task ${TASK} (nothing routed or generated for it)`,
    });
    const delivered = { keys: { [KEY]: { outcome: "delivered", at: "x" } } } as DeliveryState;
    const decided = cancelDecision(command, { conversationId: CONV, delivery: delivered });
    expect(decided).toEqual({
      refused: `the reply of ${TASK} was already delivered (${KEY}): it stays delivered`,
    });
  });

  it("reports a turn already cancelled; a failed send can still be cancelled", () => {
    const cancelled: DeliveryState = {
      keys: {},
      cancelled: { at: "2026-05-04T09:15:00.000Z", requested_by: "ops_bo" },
    };
    expect(cancelDecision(command, { conversationId: CONV, delivery: cancelled })).toEqual({
      already: `the turn of ${TASK} was already cancelled by ops_bo`,
    });
    const failed = { keys: { [KEY]: { outcome: "failed", at: "x" } } } as DeliveryState;
    expect(cancelDecision(command, { conversationId: CONV, delivery: failed })).toHaveProperty(
      "command",
    );
  });
});
