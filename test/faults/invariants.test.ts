import { describe, expect, it } from "vitest";
import { InMemoryEventStore } from "../../functions/core/memory";
import { checkInvariants, type RunFacts } from "../../lib/dev/faults/invariants";

/**
 * The one invariant checker of both chaos runs (lib/dev/faults/invariants.ts), on facts made by
 * hand: a schedule that went right breaks nothing, and each kind of wrong breaks its invariant.
 * A view that does not fold needs a stored view; the simulation's planted defects (test/sim)
 * show that one, on facts a run gathered.
 */
const right: RunFacts = {
  store: new InMemoryEventStore(),
  groups: [
    { name: "audit", subscriptions: ["task.accepted", "conversation.message.received"] },
    { name: "sender", subscriptions: ["conversation.message.received"] },
  ],
  events: [
    { eventId: "e1", eventType: "task.accepted" },
    { eventId: "e2", eventType: "conversation.message.received" },
  ],
  applied: [
    { group: "audit", eventId: "e1" },
    { group: "audit", eventId: "e2" },
    { group: "sender", eventId: "e2" },
  ],
  settled: [
    { group: "audit", eventId: "e1" },
    { group: "audit", eventId: "e2" },
    { group: "sender", eventId: "e2" },
  ],
  deadLetters: [{ group: "audit", what: "not an envelope", poison: true }],
  runs: [{ id: "run_1", ended: true, status: "COMPLETED" }],
  replies: [{ key: "task_2:reply:1" }],
  conversations: [{ id: "conv_1", sent: 2, accepted: ["task_1", "task_2"] }],
  tasks: [],
  conversationStreams: [],
  refunds: [
    { orderId: "A-1002", count: 1, onRecord: false, orderStatus: "cancelled" },
    { orderId: "123", count: 0, onRecord: true, orderStatus: "returned" },
  ],
  refundsMade: [{ key: "task_1:rrun_1:call_2_1", orderId: "A-1002", reviewOf: "A-1002" }],
  awaitingPerson: [],
};

const broken = async (facts: Partial<RunFacts>) =>
  (await checkInvariants({ ...right, ...facts })).map((v) => v.invariant);

describe("the invariants of a chaos schedule", () => {
  it("hold for a schedule that went right", async () => {
    expect(await checkInvariants(right)).toEqual([]);
  });

  it("see each kind of wrong", async () => {
    expect(
      await broken({ applied: [...right.applied, { group: "sender", eventId: "e2" }] }),
    ).toEqual(["applied once"]);
    expect(await broken({ settled: right.settled.slice(1) })).toEqual(["nothing lost"]);
    expect(await broken({ deadLetters: [] })).toEqual(["poison dead-lettered"]);
    expect(
      await broken({
        deadLetters: [...right.deadLetters, { group: "sender", what: "e2", poison: false }],
      }),
    ).toEqual(["only poison dead-lettered"]);
    expect(await broken({ runs: [{ id: "run_1", ended: false, status: "RUNNING" }] })).toEqual([
      "runs end",
    ]);
    expect(await broken({ replies: [...right.replies, { key: "task_2:reply:2" }] })).toEqual([
      "sent once",
    ]);
    expect(await broken({ replies: [{ key: "task_1:reply:1" }] })).toEqual([
      "conversations answered",
    ]);
    expect(
      await broken({ conversations: [{ id: "conv_1", sent: 2, accepted: ["task_2"] }] }),
    ).toEqual(["conversations answered"]);
    // A turn waiting for a person's decision is not unanswered.
    expect(
      await broken({ replies: [{ key: "task_1:reply:1" }], awaitingPerson: ["task_2"] }),
    ).toEqual([]);
    expect(
      await broken({
        refunds: [{ orderId: "A-1002", count: 2, onRecord: false, orderStatus: "cancelled" }],
      }),
    ).toEqual(["refunded once"]);
    // Refunded once, whoever refunded it: the shop's refund on the record counts.
    expect(
      await broken({
        refunds: [{ orderId: "123", count: 1, onRecord: true, orderStatus: "cancelled" }],
      }),
    ).toEqual(["refunded once"]);
    expect(
      await broken({
        refunds: [{ orderId: "A-1002", count: 1, onRecord: false, orderStatus: "placed" }],
      }),
    ).toEqual(["refunded ⇒ cancelled"]);
    expect(
      await broken({
        refundsMade: [{ key: "task_1:rrun_1:call_2_1", orderId: "A-1002", reviewOf: "123" }],
      }),
    ).toEqual(["refunds only the reviewed order"]);
  });
});
