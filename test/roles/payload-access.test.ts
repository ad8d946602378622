import { describe, expect, it } from "vitest";
import { contentAgentDescriptor } from "../../functions/roles/content-agents/content-agent";
import { conversationProjection } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { decideCancel } from "../../functions/roles/customer-support/sender/cancel";
import type { Envelope } from "../../schemas";
import { unvalidatedEnvelope } from "../support/factories";

/**
 * A role reads a payload only as the type its event is: one of another type (a wrong
 * subscription, a branch on the wrong type) fails permanently, where a cast read undefined fields.
 */

const envelope = (event_type: string, payload: unknown): Envelope =>
  unvalidatedEnvelope(event_type, payload, { type: "dag_run", id: "run_1", version: 1 });

const assignment = { run_id: "run_1", node_id: "n1", generation: 0 };

describe("payload access in the roles", () => {
  it("the sender's cancel refuses an event that is not a cancel", () => {
    const send = envelope("notification.send.requested", { conversation_id: "conv_1" });
    expect(() => decideCancel(undefined, send, new Date())).toThrow(
      expect.objectContaining({
        code: "payload.unexpected_type",
        message: expect.stringContaining(
          "support.cancel.requested, got notification.send.requested",
        ),
      }),
    );
  });

  it("a content agent takes the state of its own commands only", () => {
    const writing = contentAgentDescriptor("writing");
    const own = writing.stateOf?.(envelope("writing.cancel.requested", assignment));
    expect(own?.type).toBe("agent_run");
    expect(() => writing.stateOf?.(envelope("fact_check.requested", assignment))).toThrow(
      /expected the payload of writing\.requested or writing\.cancel\.requested or writing\.confirm\.requested, got fact_check\.requested/,
    );
  });

  it("the conversation view refuses a fact it does not fold before reading its payload", () => {
    const other = envelope("reply.approve.requested", { conversation_id: "conv_1" });
    expect(() => conversationProjection.stateOf?.(other)).toThrow(
      expect.objectContaining({ code: "projection.unhandled" }),
    );
    const routed = envelope("support.routed", { conversation_id: "conv_1" });
    expect(conversationProjection.stateOf?.(routed)).toEqual({
      type: "conversation_view",
      id: "conv_1",
    });
  });
});
