import { describe, expect, it } from "vitest";
import { backoff, chunk } from "../../functions/core/batching";
import { dispatch } from "../../functions/core/dispatch";
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
    });
    // the second call (events 11 and 12) never went out while event 4 could not be published
    expect(stuck.calls.map((c) => c.length)).toEqual([10, 1, 1]);
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

describe("dispatch", () => {
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
