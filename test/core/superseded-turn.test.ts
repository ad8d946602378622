import { describe, expect, it } from "vitest";
import { conversationProjection } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { checkFold } from "../../lib/operator/rebuild";
import { clientMessage } from "./fixtures";
import { newConversationId, ofType, only, supportHarness } from "./support-fixture";

/**
 * Two quick messages in one conversation (functions/roles/README.md: "I want to check my order",
 * then "the order number is A-1002"): one reply goes out, built from both, and the first turn
 * says it will get none: `superseded`, naming the turn that answers it, whichever group dropped
 * its reply, in the view and as a fact the view is folded from.
 */

const FIRST = "I want to check my order";
const SECOND = "the order number is A-1002";

describe("a turn a newer message supersedes", () => {
  it("dropped before its reply is generated: superseded by the turn that answers", async () => {
    const h = supportHarness();
    const conv = newConversationId();
    const first = clientMessage(conv, FIRST);
    const second = clientMessage(conv, SECOND);
    // Both messages are accepted before reply generation takes the first turn's request.
    await h.drain([first, second], ["reply-generation"]);
    await h.drain(ofType(h.emitted, "reply.generation.requested"));

    expect(h.log.filter((l) => l.group === "reply-generation").map((l) => l.reason)).toEqual([
      "superseded",
      undefined,
    ]);
    expect(h.model.calls).toBe(1);
    const fact = only(h.emitted, "support.superseded");
    expect(fact).toMatchObject({
      task_id: first.task_id,
      producer: "reply-generation",
      payload: { conversation_id: conv, superseded_by: second.task_id },
    });
    const view = await h.view(conv);
    expect(view?.turns[first.task_id]).toMatchObject({
      status: "superseded",
      superseded_by: second.task_id,
    });
    expect(view?.turns[first.task_id]?.reply_text).toBeUndefined();
    expect(view?.turns[second.task_id]).toMatchObject({ status: "delivered", order_id: "A-1002" });
    expect(h.channel.deliveries().map((d) => d.key)).toEqual([`${second.task_id}:reply:1`]);
  });

  it("dropped by the sender after its reply was generated: superseded, its draft never sent", async () => {
    const h = supportHarness();
    const conv = newConversationId();
    const first = clientMessage(conv, FIRST);
    const second = clientMessage(conv, SECOND);
    // Both replies are generated before the sender takes the first one's send.
    await h.drain([first], ["sender"]);
    await h.drain([second], ["sender"]);
    await h.drain(ofType(h.emitted, "notification.send.requested"));

    expect(h.log.filter((l) => l.group === "sender").map((l) => l.reason)).toEqual([
      "superseded",
      undefined,
    ]);
    expect(only(h.emitted, "support.superseded")).toMatchObject({
      task_id: first.task_id,
      producer: "sender",
      payload: { conversation_id: conv, superseded_by: second.task_id },
    });
    const view = await h.view(conv);
    expect(view?.turns[first.task_id]).toMatchObject({
      status: "superseded",
      superseded_by: second.task_id,
      reply_text: expect.any(String),
    });
    expect(view?.turns[second.task_id]?.status).toBe("delivered");
    expect(h.channel.deliveries().map((d) => d.key)).toEqual([`${second.task_id}:reply:1`]);
  });

  it("the view folded again from its streams (agentbus check) is the view kept live", async () => {
    const h = supportHarness();
    const conv = newConversationId();
    const first = clientMessage(conv, FIRST);
    const second = clientMessage(conv, SECOND);
    await h.drain([first], ["sender"]);
    await h.drain([second], ["sender"]);
    await h.drain(ofType(h.emitted, "notification.send.requested"));

    const streams = [
      { type: "conversation", id: conv },
      ...[first, second].flatMap(({ task_id: id }) =>
        ["support_route", "order_lookup", "reply", "delivery"].map((type) => ({ type, id })),
      ),
    ];
    const checked = await checkFold(h.store, conversationProjection, streams);
    expect(checked).toEqual({ states: 1, drift: [] });
    expect((await h.view(conv))?.turns[first.task_id]).toMatchObject({
      status: "superseded",
      superseded_by: second.task_id,
    });
  });
});
