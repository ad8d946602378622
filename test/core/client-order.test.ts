import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { ConsumeResult } from "../../functions/core/role";
import { planSweep } from "../../functions/core/sweeper";
import {
  type ConversationState,
  conversationRole,
} from "../../functions/roles/customer-support/conversation/conversation";
import type { Envelope } from "../../schemas";
import { registry } from "../../schemas";
import { clientMessage, makeDeps } from "./fixtures";
import { newConversationId } from "./support-fixture";

/**
 * A conversation applies its client's messages in `client_seq` order, whatever order they arrive
 * in (functions/roles/customer-support/conversation/client-order.ts).
 */

const HOLD_SECONDS = 60;
const role = conversationRole({ holdSeconds: HOLD_SECONDS });

function sequenced(conv: string, seq: number): Envelope {
  const message = clientMessage(conv, `message ${seq}`);
  return { ...message, payload: { ...(message.payload as object), client_seq: seq } } as Envelope;
}

/** The texts of the accepted messages, in the order the conversation accepted them. */
const acceptedTexts = (results: readonly ConsumeResult[]) =>
  results.flatMap((r) =>
    r.steps.flatMap((s) =>
      s.emitted
        .filter((e) => e.event_type === "conversation.message.accepted")
        .map((e) => (e.payload as { text: string }).text),
    ),
  );

const skippedOf = (results: readonly ConsumeResult[]) =>
  results.flatMap((r) =>
    r.steps.flatMap((s) =>
      s.emitted
        .filter((e) => e.event_type === "conversation.sequence.skipped")
        .map((e) => e.payload as { from: number; to: number }),
    ),
  );

async function stateOf(store: ReturnType<typeof makeDeps>["store"], conv: string) {
  return (await store.load({ state: { type: "conversation", id: conv } })).state
    ?.data as ConversationState;
}

describe("client order", () => {
  it("holds a message that comes before the one sent ahead of it, then applies both in order", async () => {
    const { deps, store } = makeDeps();
    const conv = newConversationId();
    const [one, two] = [sequenced(conv, 1), sequenced(conv, 2)];
    const early = await consume(two, role, deps);
    expect(early.status).toBe("applied");
    expect(acceptedTexts([early])).toEqual([]);
    expect((await stateOf(store, conv)).held?.map((m) => m.client_seq)).toEqual([2]);

    const late = await consume(one, role, deps);
    expect(acceptedTexts([late])).toEqual(["message 1", "message 2"]);
    const accepted = late.steps[0]?.emitted.filter(
      (e) => e.event_type === "conversation.message.accepted",
    );
    // Each turn keeps its own task and chain, the held one's caused by its own message.
    expect(accepted?.map((e) => [e.task_id, e.causation_id, e.correlation_id])).toEqual([
      [one.task_id, one.event_id, one.correlation_id],
      [two.task_id, two.event_id, two.correlation_id],
    ]);
    const state = await stateOf(store, conv);
    expect([state.client_seq, state.held, state.version]).toEqual([2, undefined, 2]);
  });

  it("discards a repeated sequence, applied or held, without applying it again", async () => {
    const { deps } = makeDeps();
    const conv = newConversationId();
    await consume(sequenced(conv, 1), role, deps);
    await consume(sequenced(conv, 3), role, deps);
    const again = await Promise.all([
      consume(sequenced(conv, 1), role, deps),
      consume(sequenced(conv, 3), role, deps),
    ]);
    expect(again.map((r) => [r.status, r.reason])).toEqual([
      ["discarded", "superseded"],
      ["discarded", "superseded"],
    ]);
    expect(acceptedTexts(again)).toEqual([]);
  });

  it("applies a held message once its wait is over, recording the sequence it skipped", async () => {
    const { deps, clock, store } = makeDeps();
    const conv = newConversationId();
    const results = [await consume(sequenced(conv, 1), role, deps)];
    results.push(await consume(sequenced(conv, 3), role, deps));
    const [due] = await store.loadStates([{ type: "conversation", id: conv }]);
    expect(due?.dueAt).toBe("2026-09-01T10:01:00.000Z");

    // Before the wait is over the sweeper sends nothing; after it, the nudge.
    clock.advance(59_000);
    expect(await store.due(clock.now(), 10)).toEqual([]);
    expect(planSweep(due ? [due] : [], clock.now(), registry).messages).toEqual([]);
    clock.advance(1_000);
    expect(await store.due(clock.now(), 10)).toEqual([{ type: "conversation", id: conv }]);
    const [nudge] = planSweep(due ? [due] : [], clock.now(), registry).messages;
    expect(nudge?.envelope.event_type).toBe("conversation.hold.expired");
    results.push(await consume(nudge?.envelope as Envelope, role, deps));

    expect(acceptedTexts(results)).toEqual(["message 1", "message 3"]);
    expect(skippedOf(results)).toEqual([expect.objectContaining({ from: 2, to: 2 })]);
    // The skipped sequence, arriving now, is a repeat.
    const late = await consume(sequenced(conv, 2), role, deps);
    expect([late.status, acceptedTexts([late])]).toEqual(["discarded", []]);
    expect((await stateOf(store, conv)).client_seq).toBe(3);
  });

  it("applies an unsequenced message as it arrives", async () => {
    const { deps } = makeDeps();
    const conv = newConversationId();
    const held = await consume(sequenced(conv, 2), role, deps);
    const plain = await consume(clientMessage(conv, "no sequence"), role, deps);
    expect(acceptedTexts([held, plain])).toEqual(["no sequence"]);
  });

  it("refuses a wait that is not a positive number", () => {
    expect(() => conversationRole({ holdSeconds: 0 })).toThrow(/holdSeconds/);
  });

  it("applies any arrival order and duplication of N messages in sequence order, exactly once", async () => {
    await fc.assert(orderProperty(sequenced), { numRuns: 150 });
  });

  it("the property fails when the messages carry no sequence (applied as they arrive)", async () => {
    const unsequenced = (conv: string, seq: number) => clientMessage(conv, `message ${seq}`);
    await expect(fc.assert(orderProperty(unsequenced), { numRuns: 150 })).rejects.toThrow();
  });
});

/**
 * Any arrival order of N messages, each arriving twice (the same event again, or a resend under a
 * new event id), some never arriving: the accepted messages are the sent ones in sequence order,
 * once each, and each sequence missing before the last sent one is recorded as skipped.
 */
function orderProperty(send: (conv: string, seq: number) => Envelope) {
  return fc.asyncProperty(
    fc.integer({ min: 1, max: 8 }).chain((n) =>
      fc.record({
        n: fc.constant(n),
        arrivals: fc.shuffledSubarray(
          Array.from({ length: n * 2 }, (_, i) => (i % n) + 1),
          { minLength: n * 2, maxLength: n * 2 },
        ),
        dropped: fc.subarray(Array.from({ length: n }, (_, i) => i + 1)),
      }),
    ),
    async ({ n, arrivals, dropped }) => {
      const { deps, clock } = makeDeps();
      const conv = newConversationId();
      const messages = new Map<number, Envelope>();
      const results: ConsumeResult[] = [];
      for (const seq of arrivals) {
        if (dropped.includes(seq)) continue;
        const message = messages.get(seq) ?? send(conv, seq);
        const repeat = messages.has(seq);
        messages.set(seq, message);
        const sent = repeat && seq % 2 === 0 ? { ...message, event_id: newUlidLike(seq) } : message;
        results.push(await consume(sent, role, deps));
        clock.advance(100);
      }
      // The wait passes: the sweeper's nudge settles what is held.
      clock.advance(HOLD_SECONDS * 1000);
      const nudge = {
        ...clientMessage(conv, "nudge"),
        event_type: "conversation.hold.expired",
        payload: { conversation_id: conv, due_at: clock.now().toISOString() },
      } as Envelope;
      results.push(await consume(nudge, role, deps));

      const sent = Array.from({ length: n }, (_, i) => i + 1).filter((s) => !dropped.includes(s));
      expect(acceptedTexts(results)).toEqual(sent.map((s) => `message ${s}`));
      const gaps = skippedOf(results).flatMap(({ from, to }) =>
        Array.from({ length: to - from + 1 }, (_, i) => from + i),
      );
      const last = sent.at(-1) ?? 0;
      expect(gaps).toEqual(dropped.filter((d) => d < last).sort((a, b) => a - b));
    },
  );
}

let counter = 0;
/** A fresh event id (a ULID's form) for a resend of message `seq`. */
function newUlidLike(seq: number): string {
  counter++;
  return `01KB0R${String(seq).padStart(2, "0")}${String(counter).padStart(18, "0")}`;
}
