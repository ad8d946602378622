import { describe, expect, it } from "vitest";
import { backoff, chunk } from "../../functions/core/batching";
import { dispatch, messageGroupOf } from "../../functions/core/dispatch";
import type {
  DeadLetterSink,
  EventPublisher,
  FifoMessage,
  FifoSender,
} from "../../functions/core/ports";
import { relay } from "../../functions/core/relay";
import { type Envelope, envelopeBytes, registry, type Topic } from "../../schemas";
import { feedback, makeDeps, newTaskId, seedTask } from "./fixtures";

const noWait = async () => {};

class RecordingPublisher implements EventPublisher {
  calls: { topic: Topic; ids: string[]; bytes: number }[] = [];
  constructor(private readonly failOnce = new Set<string>()) {}
  async publish(topic: Topic, envelopes: readonly Envelope[]) {
    this.calls.push({
      topic,
      ids: envelopes.map((e) => e.event_id),
      bytes: envelopes.reduce((n, e) => n + envelopeBytes(e), 0),
    });
    const failed = envelopes.filter((e) => this.failOnce.delete(e.event_id));
    return failed.map((e) => ({
      eventId: e.event_id,
      code: "InternalFailure",
      message: "try again",
    }));
  }
}

describe("chunk", () => {
  it("respects both the entry and the byte limit and keeps order", () => {
    const items = Array.from({ length: 25 }, (_, i) => i);
    expect(chunk(items, () => 1, 10, 1000).map((c) => c.length)).toEqual([10, 10, 5]);
    expect(chunk(items, () => 300, 10, 1000).map((c) => c.length)).toEqual([
      3, 3, 3, 3, 3, 3, 3, 3, 1,
    ]);
    expect(chunk(items, () => 1, 10, 1000).flat()).toEqual(items);
  });
  it("gives an oversized item a chunk of its own", () => {
    expect(chunk([1, 5000, 2], (n) => n, 10, 1000)).toEqual([[1], [5000], [2]]);
  });
  it("bounds backoff by the cap", () => {
    expect(backoff(20, 50, 2000, () => 0.999)).toBeLessThan(2000);
  });
});

describe("relay", () => {
  it("publishes in calls of at most 10 entries and 256 KB, in stream order", async () => {
    const { deps } = makeDeps();
    const events: Envelope[] = [];
    for (let i = 0; i < 6; i++) events.push(...(await seedTask(deps, 4)));
    const big = feedback(newTaskId(), 3, { payload: { rating: 3, comment: "y".repeat(100_000) } });
    const all = [...events, big, big, big];
    const publisher = new RecordingPublisher();
    const report = await relay(all, registry, publisher, { wait: noWait });
    expect(report.published).toBe(all.length);
    for (const call of publisher.calls) {
      expect(call.ids.length).toBeLessThanOrEqual(10);
      expect(call.bytes).toBeLessThanOrEqual(256 * 1024);
    }
    expect(publisher.calls.flatMap((c) => c.ids)).toEqual(all.map((e) => e.event_id));
  });

  it("retries only the entries that failed", async () => {
    const { deps } = makeDeps();
    const events = await seedTask(deps, 4);
    const publisher = new RecordingPublisher(new Set([events[1]?.event_id ?? ""]));
    const report = await relay(events, registry, publisher, { wait: noWait });
    expect(publisher.calls.map((c) => c.ids.length)).toEqual([4, 1]);
    expect(publisher.calls[1]?.ids).toEqual([events[1]?.event_id]);
    expect(report).toMatchObject({ published: 4, retriedEntries: 1 });
  });

  it("retries a call's failed entries before the next call, and stops there if they keep failing", async () => {
    const { deps } = makeDeps();
    const events: Envelope[] = [];
    for (let i = 0; i < 3; i++) events.push(...(await seedTask(deps, 4)));
    const flaky = new RecordingPublisher(new Set([events[3]?.event_id ?? ""]));
    await relay(events, registry, flaky, { wait: noWait });
    expect(flaky.calls.map((c) => c.ids.length)).toEqual([10, 1, 2]);
    const stuckId = events[3]?.event_id;
    const stuck: EventPublisher & { calls: string[][] } = {
      calls: [],
      async publish(_t, es) {
        this.calls.push(es.map((e) => e.event_id));
        return es
          .filter((e) => e.event_id === stuckId)
          .map((e) => ({ eventId: e.event_id, code: "InternalFailure", message: "x" }));
      },
    };
    await expect(
      relay(events, registry, stuck, { wait: noWait, maxAttempts: 3 }),
    ).rejects.toMatchObject({
      code: "relay.publish_failed",
      // What the relay's failure record names: event 4 and the two the stop kept back.
      details: { unpublished: [events[3], events[10], events[11]].map((e) => e?.event_id) },
    });
    // the second call (events 11 and 12) never went out while event 4 could not be published
    expect(stuck.calls.map((c) => c.length)).toEqual([10, 1, 1]);
  });

  it("leaves out the stack's unpublished types, publishes the rest in stream order, and names only those in a failure", async () => {
    const { deps } = makeDeps();
    const events: Envelope[] = [];
    for (let i = 0; i < 3; i++) events.push(...(await seedTask(deps, 4)));
    const left = events[1]?.event_type ?? "";
    const kept = events.filter((e) => e.event_type !== left);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(events.length);
    const unpublished = new Set([left]);
    const publisher = new RecordingPublisher();
    const report = await relay(events, registry, publisher, { wait: noWait, unpublished });
    expect(publisher.calls.flatMap((c) => c.ids)).toEqual(kept.map((e) => e.event_id));
    expect(report).toMatchObject({
      published: kept.length,
      skipped: events.length - kept.length,
    });
    const refusing: EventPublisher = {
      publish: async (_t, es) =>
        es.map((e) => ({ eventId: e.event_id, code: "InternalFailure", message: "x" })),
    };
    await expect(
      relay(events, registry, refusing, { wait: noWait, maxAttempts: 1, unpublished }),
    ).rejects.toMatchObject({
      code: "relay.publish_failed",
      details: { unpublished: kept.map((e) => e.event_id) },
    });
  });

  it("fails the batch (transient) when entries keep failing, so the stream retries", async () => {
    const { deps } = makeDeps();
    const events = await seedTask(deps, 2);
    const stubborn: EventPublisher = {
      publish: async (_t, es) =>
        es.map((e) => ({ eventId: e.event_id, code: "ThrottlingException", message: "slow down" })),
    };
    await expect(
      relay(events, registry, stubborn, { wait: noWait, maxAttempts: 3 }),
    ).rejects.toMatchObject({
      code: "relay.publish_failed",
      errorClass: "transient",
    });
  });
});

class RecordingSender implements FifoSender {
  sent: FifoMessage[] = [];
  constructor(private readonly fail: (m: FifoMessage) => boolean = () => false) {}
  async send(messages: readonly FifoMessage[]) {
    this.sent.push(...messages.filter((m) => !this.fail(m)));
    return messages
      .filter(this.fail)
      .map((m) => ({ id: m.id, code: "InternalError", message: "x" }));
  }
}

class RecordingDeadLetters implements DeadLetterSink {
  items: { code: string; body: string }[] = [];
  async send(m: { body: string; code: string }) {
    this.items.push({ code: m.code, body: m.body });
  }
}

describe("messageGroupOf: the FIFO message group of an envelope", () => {
  const keys = Array.from({ length: 60 }, (_, i) => `conv_${i}`);

  it("is the order key when the group bounds no tenant", () => {
    expect(messageGroupOf({ order_key: "conv_1", tenant_id: "acme" })).toBe("conv_1");
  });

  it("puts a tenant's order keys in exactly its lanes, each key always in the same one", () => {
    const groups = keys.map((order_key) => messageGroupOf({ order_key, tenant_id: "acme" }, 3));
    expect(new Set(groups)).toEqual(new Set(["tenant/acme/0", "tenant/acme/1", "tenant/acme/2"]));
    expect(keys.map((order_key) => messageGroupOf({ order_key, tenant_id: "acme" }, 3))).toEqual(
      groups,
    );
  });

  it("never puts two tenants in one group, and an envelope without a tenant in the default's", () => {
    const of = (tenant_id?: string) =>
      new Set(keys.map((order_key) => messageGroupOf({ order_key, tenant_id }, 2)));
    const acme = of("acme");
    expect([...of("globex")].filter((g) => acme.has(g))).toEqual([]);
    expect(of(undefined)).toEqual(new Set(["tenant/default/0", "tenant/default/1"]));
    // The same order key of two tenants: the same lane number, two groups.
    expect(messageGroupOf({ order_key: "conv_1", tenant_id: "acme" }, 2).slice(-1)).toBe(
      messageGroupOf({ order_key: "conv_1", tenant_id: "globex" }, 2).slice(-1),
    );
  });
});

describe("dispatch", () => {
  it("keys FIFO messages by tenant lane when given a tenant concurrency", async () => {
    const { deps } = makeDeps();
    const events = [...(await seedTask(deps, 2)), ...(await seedTask(deps, 2))].map((e) => ({
      ...e,
      tenant_id: "acme",
    }));
    const sender = new RecordingSender();
    const items = events.map((e, i) => ({ recordId: `r${i}`, envelope: e, rawBody: "" }));
    const report = await dispatch(items, registry, sender, new RecordingDeadLetters(), 2);
    expect(report).toMatchObject({ sent: 4, failedRecordIds: [] });
    expect(sender.sent.map((m) => m.groupId)).toEqual(events.map((e) => messageGroupOf(e, 2)));
    expect(sender.sent.every((m) => /^tenant\/acme\/[01]$/.test(m.groupId))).toBe(true);
  });

  it("keys FIFO messages by order key and de-duplicates by event id", async () => {
    const { deps } = makeDeps();
    const events = await seedTask(deps, 3);
    const sender = new RecordingSender();
    const items = events.map((e, i) => ({
      recordId: `r${i}`,
      envelope: e,
      rawBody: JSON.stringify(e),
    }));
    const report = await dispatch(items, registry, sender, new RecordingDeadLetters());
    expect(report).toMatchObject({ sent: 3, deadLettered: 0, failedRecordIds: [] });
    expect(sender.sent.map((m) => [m.groupId, m.deduplicationId])).toEqual(
      events.map((e) => [e.aggregate.id, e.event_id]),
    );
    expect(JSON.parse(sender.sent[0]?.body ?? "{}")).toEqual(events[0]);
  });

  it("dead-letters an invalid envelope at once with its reason and sends the rest", async () => {
    const { deps } = makeDeps();
    const [good] = await seedTask(deps, 1);
    const dlq = new RecordingDeadLetters();
    const sender = new RecordingSender();
    const report = await dispatch(
      [
        { recordId: "bad", envelope: { hello: "world" }, rawBody: '{"hello":"world"}' },
        { recordId: "good", envelope: good, rawBody: JSON.stringify(good) },
      ],
      registry,
      sender,
      dlq,
    );
    expect(report).toMatchObject({ sent: 1, deadLettered: 1, failedRecordIds: [] });
    expect(dlq.items).toEqual([{ code: "envelope.invalid", body: '{"hello":"world"}' }]);
  });

  it("hands back an invalid envelope whose dead-letter send failed, and sends the rest", async () => {
    const { deps } = makeDeps();
    const [good] = await seedTask(deps, 1);
    const sender = new RecordingSender();
    const unreachable: DeadLetterSink = { send: () => Promise.reject(new Error("socket hang up")) };
    const report = await dispatch(
      [
        { recordId: "bad", envelope: { hello: "world" }, rawBody: '{"hello":"world"}' },
        { recordId: "good", envelope: good, rawBody: JSON.stringify(good) },
      ],
      registry,
      sender,
      unreachable,
    );
    expect(report).toMatchObject({ sent: 1, deadLettered: 0, failedRecordIds: ["bad"] });
    expect(sender.sent.map((m) => m.deduplicationId)).toEqual([good?.event_id]);
  });

  it("hands back exactly the records whose send failed", async () => {
    const { deps } = makeDeps();
    const events: Envelope[] = [];
    for (let i = 0; i < 3; i++) events.push(...(await seedTask(deps, 4)));
    const victim = events[7]?.event_id;
    const sender = new RecordingSender((m) => m.deduplicationId === victim);
    const items = events.map((e, i) => ({ recordId: `r${i}`, envelope: e, rawBody: "" }));
    const report = await dispatch(items, registry, sender, new RecordingDeadLetters());
    expect(report.failedRecordIds).toEqual(["r7"]);
    expect(report.calls).toBe(2);
  });
});
