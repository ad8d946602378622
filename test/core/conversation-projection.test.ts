import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import { appendToStream } from "../../functions/core/producer";
import {
  type ConversationView,
  conversationProjection,
  TURN_LIMIT,
} from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import { HELD_REQUIRES_REVIEW } from "../../functions/roles/customer-support/reply-generation/reply-generation";
import { refundRunId } from "../../functions/roles/refund-review/ids";
import type { Envelope } from "../../schemas";
import { clientMessage } from "./fixtures";
import {
  newConversationId,
  ofType,
  only,
  type SupportHarness,
  supportHarness,
} from "./support-fixture";

/** The conversation projection over a whole chain of support facts, turn by turn. */

/** The support roles but the sender (sends are left unsent), with a model that counts its calls. */
const harness = () => supportHarness({ without: ["sender"] });

describe("the whole chain and the conversation projection", () => {
  /** The sender's outcome, appended on delivery/<task_id> as the sender would. */
  async function deliver(h: SupportHarness, send: Envelope, outcome: "delivered" | "failed") {
    const payload = send.payload as { conversation_id: string; channel: string };
    const key = `${send.task_id}:reply:1`;
    return appendToStream(h.deps, {
      aggregate: { type: "delivery", id: send.task_id },
      producer: "sender",
      correlationId: send.correlation_id,
      taskId: send.task_id,
      cause: send,
      decide: () => ({
        state: { outcome },
        emit: [
          outcome === "delivered"
            ? {
                type: "notification.delivered",
                payload: {
                  ...base(payload),
                  idempotency_key: key,
                  delivery_id: "dlv_1",
                  confirmed_by: "send",
                },
                orderKey: payload.conversation_id,
                inputVersion: send.input_version,
              }
            : {
                type: "notification.failed",
                payload: {
                  ...base(payload),
                  idempotency_key: key,
                  code: "channel.rejected",
                  message: "blocked",
                  outcome: "failed",
                },
                orderKey: payload.conversation_id,
                inputVersion: send.input_version,
              },
        ],
      }),
    });
  }
  const base = (p: { conversation_id: string; channel: string }) => ({
    conversation_id: p.conversation_id,
    channel: p.channel,
  });

  it("folds a whole chain per turn, and drops a superseded reply", async () => {
    const h = harness();
    const conv = newConversationId();
    const first = clientMessage(conv, "Where is order 123?");
    const second = clientMessage(conv, "And is order A-1001 shipped?");
    const third = clientMessage(conv, "Refund order 456");
    // Two messages arrive before any reply is generated: the first reply is superseded.
    await h.drain([first, second], ["reply-generation"]);
    const pending = ofType(h.emitted, "reply.generation.requested");
    expect(pending).toHaveLength(2);
    await h.drain(pending);
    expect(h.log.filter((l) => l.group === "reply-generation")).toEqual([
      {
        group: "reply-generation",
        type: "reply.generation.requested",
        status: "discarded",
        reason: "superseded",
      },
      {
        group: "reply-generation",
        type: "reply.generation.requested",
        status: "applied",
        reason: undefined,
      },
    ]);
    expect(h.model.calls).toBe(1);
    const send = only(h.emitted, "notification.send.requested");
    expect(send.task_id).toBe(second.task_id);
    expect(send.input_version).toBe(2);

    await h.drain(await deliver(h, send, "delivered"));
    await h.drain([third]);

    const view = (await h.state<ConversationView>("conversation_view", conv)) as ConversationView;
    expect(view.version).toBe(3);
    expect(view.turn_order).toEqual([first.task_id, second.task_id, third.task_id]);
    expect(view.turns[first.task_id]).toEqual({
      task_id: first.task_id,
      input_version: 1,
      text: "Where is order 123?",
      intent: "order_status",
      order_id: "123",
      order_found: true,
      looked_up_at: h.clock.now().toISOString(),
      status: "superseded",
      superseded_by: second.task_id,
    });
    expect(view.turns[second.task_id]).toMatchObject({
      input_version: 2,
      intent: "order_status",
      order_id: "A-1001",
      order_found: true,
      status: "delivered",
      delivery: {
        idempotency_key: `${second.task_id}:reply:1`,
        delivery_id: "dlv_1",
        confirmed_by: "send",
      },
    });
    expect(view.turns[second.task_id]?.reply_text).toContain("shipped");
    // Order 456 is Bob's: the refund agent does not find it for Alice; the reply was generated
    // and sent for delivery.
    expect(view.turns[third.task_id]).toMatchObject({
      input_version: 3,
      intent: "refund",
      status: "generated",
    });
    expect(view.turns[third.task_id]?.reply_text).toContain("could not find order 456");
  });

  it("never moves a turn backwards, whatever order its facts arrive in", async () => {
    const h = harness();
    const conv = newConversationId();
    const message = clientMessage(conv, "Where is order 123?");
    await h.drain([message], ["conversation-projection"]);
    const send = only(h.emitted, "notification.send.requested");
    const [delivered] = await deliver(h, send, "delivered");
    const [failed] = await deliver(h, send, "failed");
    // Facts in reverse order: delivery first, the acceptance last.
    const facts = [
      delivered,
      failed,
      ...h.emitted
        .filter((e) => conversationProjection.subscriptions.includes(e.event_type))
        .reverse(),
    ] as Envelope[];
    for (const fact of facts) await consume(fact, conversationProjection, h.deps);
    const view = (await h.state<ConversationView>("conversation_view", conv)) as ConversationView;
    expect(view.turns[message.task_id]).toMatchObject({
      status: "delivered",
      text: "Where is order 123?",
      intent: "order_status",
      order_found: true,
      delivery: { delivery_id: "dlv_1", confirmed_by: "send" },
    });
    expect(view.turns[message.task_id]?.delivery?.code).toBeUndefined();
  });

  it("records a failed delivery and a held reply", async () => {
    const h = harness();
    const conv = newConversationId();
    const message = clientMessage(conv, "Where is order 123?");
    await h.drain([message]);
    await h.drain(await deliver(h, only(h.emitted, "notification.send.requested"), "failed"));
    const held = clientMessage(conv, `Refund order 123? ${HUMAN_REVIEW_MARKER}`);
    await h.drain([held]);
    const view = (await h.state<ConversationView>("conversation_view", conv)) as ConversationView;
    expect(view.turns[message.task_id]).toMatchObject({
      status: "failed",
      delivery: { idempotency_key: `${message.task_id}:reply:1`, code: "channel.rejected" },
    });
    expect(view.turns[held.task_id]).toMatchObject({
      status: "held_for_review",
      held_reason: HELD_REQUIRES_REVIEW,
    });
  });

  it("keeps the last 50 turns", async () => {
    const h = harness();
    const conv = newConversationId();
    const messages = Array.from({ length: 52 }, (_, i) => clientMessage(conv, `hello ${i}`));
    // The conversation group and the projection only.
    await h.drain(messages, ["router", "order-lookup", "reply-generation"]);
    const view = (await h.state<ConversationView>("conversation_view", conv)) as ConversationView;
    expect(view.turn_order).toHaveLength(50);
    expect(Object.keys(view.turns)).toHaveLength(50);
    expect(view.turn_order[0]).toBe(messages[2]?.task_id);
    expect(view.turns[messages[0]?.task_id ?? ""]).toBeUndefined();
    expect(view.version).toBe(52);
  });

  it("keeps its gate records to the turns it keeps, and ignores a dropped turn's fact that comes again", async () => {
    // The whole chain with the sender: each turn's facts come on four streams of its task.
    const h = supportHarness();
    const conv = newConversationId();
    const records = async () => {
      const loaded = await h.store.load({ state: { type: "conversation_view", id: conv } });
      return loaded.state;
    };
    const sizes: number[] = [];
    for (let i = 0; i < TURN_LIMIT + 20; i++) {
      await h.drain([clientMessage(conv, "Where is order 123?")]);
      const stored = await records();
      if (i + 1 === TURN_LIMIT + 1 || i + 1 === TURN_LIMIT + 20)
        sizes.push(JSON.stringify(stored?.gate).length);
    }
    const stored = await records();
    const view = stored?.data as ConversationView;
    expect(view.turn_order).toHaveLength(TURN_LIMIT);
    const streams = Object.keys(stored?.gate?.checkpoints ?? {});
    const ids = new Set(streams.map((key) => key.slice(key.indexOf("#") + 1)));
    // Only the conversation's stream and the streams of kept turns; each kept turn's four.
    expect([...ids].sort()).toEqual([conv, ...view.turn_order].sort());
    expect(streams).toHaveLength(1 + 4 * TURN_LIMIT);
    // 19 more turns, each dropping one, leave the records the size they were (ids are as long).
    expect(sizes[1]).toBe(sizes[0]);

    // The first turn's reply, delivered again: nothing of the view or its records changes.
    const first = h.emitted.find((e) => e.event_type === "reply.generated") as Envelope;
    expect(view.turns[first.task_id]).toBeUndefined();
    const result = await consume(first, conversationProjection, h.deps);
    expect(result.status).toBe("applied");
    const again = await records();
    expect(again?.data).toEqual(view);
    expect(again?.gate?.checkpoints).toEqual(stored?.gate?.checkpoints);
  });

  it("forgets only the streams of a turn it no longer keeps: its steps' and its refund review's", () => {
    const conv = newConversationId();
    const kept = "task_01KB0R7Q2M5N8P1R4T6V9X2Z3A";
    const dropped = "task_01KB0R7Q2M5N8P1R4T6V9X2Z3B";
    const view: ConversationView = {
      conversation_id: conv,
      version: 2,
      turns: { [kept]: { task_id: kept, status: "delivered" } },
      turn_order: [kept],
      dropped_through: 1,
    };
    const forgets = (type: string, id: string) =>
      conversationProjection.forgets?.(view, { type, id });
    for (const type of ["support_route", "order_lookup", "reply", "delivery"]) {
      expect(forgets(type, kept)).toBe(false);
      expect(forgets(type, dropped)).toBe(true);
    }
    expect(forgets("agent_run", refundRunId(kept))).toBe(false);
    expect(forgets("agent_run", refundRunId(dropped))).toBe(true);
    // Streams it cannot tell the turn of keep their checkpoints: the conversation's, any other.
    expect(forgets("conversation", conv)).toBe(false);
    expect(forgets("agent_run", "arun_01KB0R7Q2M5N8P1R4T6V9X2Z3B")).toBe(false);
    expect(forgets("payment", dropped)).toBe(false);
  });
});
