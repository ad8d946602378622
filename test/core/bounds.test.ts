import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { ContentRequest } from "../../functions/roles/content-agents/events";
// The customer-support application's event types, which its role modules would define.
import "../../functions/roles/customer-support/events/index";
import { jsonBytes, newestWithin } from "../../functions/core/budget";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import {
  type ConversationState,
  conversation,
  MESSAGES_MAX_BYTES,
} from "../../functions/roles/customer-support/conversation/conversation";
import {
  type ConversationView,
  conversationProjection,
  TURNS_MAX_BYTES,
} from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { type Envelope, registry } from "../../schemas";
import { clientMessage, makeDeps, seedTask } from "./fixtures";

/** Nothing a message carries may grow a stored item or a computation without bound. */
describe("bounds on what a message can grow", () => {
  it("keeps the conversation's state inside its byte budget however long the messages are", async () => {
    const { deps, store } = makeDeps();
    const conv = `conv_${ulid()}`;
    const long = "退款".repeat(2000); // 4000 characters, 12 KB of UTF-8
    for (let i = 0; i < 50; i++)
      expect((await consume(clientMessage(conv, long), conversation, deps)).status).toBe("applied");
    const state = store.states.get(`conversation#${conv}`)?.data as ConversationState;
    expect(state.version).toBe(50);
    expect(jsonBytes(state.messages)).toBeLessThanOrEqual(MESSAGES_MAX_BYTES);
    expect(state.messages.length).toBeGreaterThan(5);
    expect(state.messages.length).toBeLessThan(50);
    expect(state.messages.at(-1)?.version).toBe(50);
  });

  it("keeps the conversation view inside its byte budget and ignores facts of dropped turns", async () => {
    const { deps, store } = makeDeps();
    const conv = `conv_${ulid()}`;
    const long = "退款".repeat(2000);
    const accepted: Envelope[] = [];
    for (let i = 0; i < 40; i++) {
      const result = await consume(clientMessage(conv, long), conversation, deps);
      accepted.push(result.steps[0]?.emitted[0] as Envelope);
    }
    for (const e of accepted) await consume(e, conversationProjection, deps);
    const view = store.states.get(`conversation_view#${conv}`)?.data as ConversationView;
    expect(jsonBytes(view.turns)).toBeLessThanOrEqual(TURNS_MAX_BYTES);
    expect(view.turn_order.length).toBeLessThan(40);
    expect(view.dropped_through).toBe(40 - view.turn_order.length);
  });

  it("keeps the newest items within a budget, and always the newest one", () => {
    expect(newestWithin(["aaaa", "bb", "c"], 9)).toEqual(["bb", "c"]);
    expect(newestWithin(["x".repeat(100)], 10)).toEqual(["x".repeat(100)]);
    expect(newestWithin([], 10)).toEqual([]);
  });

  it("hands a repaired event a receive count of 1, whatever the delivered message's", async () => {
    const { deps } = makeDeps();
    const events = await seedTask(deps, 3);
    const counts: number[] = [];
    const role: Role<{ n: number }> = {
      group: "counting",
      subscriptions: events.map((e) => e.event_type),
      decide: (state, _e, { receiveCount }) => {
        counts.push(receiveCount);
        return { state: { n: (state?.n ?? 0) + 1 } };
      },
    };
    await consume(events[2], role, deps, { receiveCount: 4 });
    expect(counts).toEqual([1, 1, 4]);
  });

  it("refuses an envelope nested too deep to serialize as invalid, instead of throwing", () => {
    let deep: unknown = "leaf";
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const parsed = registry.parse({ event_id: ulid(), payload: deep });
    expect(parsed).toMatchObject({ ok: false, code: "envelope.invalid" });
  });

  it("names at most 20 validation issues of a payload and counts the rest", async () => {
    const { deps } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    const bad = {
      ...accepted,
      event_type: "workflow.completed",
      payload: {
        run_id: "run_1",
        result: {
          status: "COMPLETED",
          outputs: {},
          completed: Array.from({ length: 500 }, (_, i) => i),
          degraded: [],
          failed: [],
          cancelled: [],
          skipped: [],
        },
      },
    };
    const parsed = registry.parse(bad);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.message).toMatch(/and \d+ more issues/);
    expect(parsed.message.length).toBeLessThan(10_000);
  });

  it("refuses a timestamp longer than 40 characters", async () => {
    const { deps } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    const parsed = registry.parse({
      ...accepted,
      occurred_at: `2026-09-01T10:00:00.${"1".repeat(200)}Z`,
    });
    expect(parsed).toMatchObject({ ok: false, code: "envelope.invalid" });
  });

  it("refuses a content request nested too deep or too big to copy into a run", () => {
    const payload = ContentRequest.safeParse;
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 10; i++) deep = { deep };
    expect(payload({ topic_hint: "tides", extra: deep }).success).toBe(false);
    expect(payload({ topic_hint: "tides", extra: "x".repeat(20_000) }).success).toBe(false);
    expect(payload({ topic_hint: "tides", audience: { region: "eu" } }).success).toBe(true);
  });
});
