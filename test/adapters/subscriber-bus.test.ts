import { describe, expect, it } from "vitest";
import {
  BothBusesPublisher,
  type SubscriberBusClient,
  SubscriberBusPublisher,
  type SubscriberBusPutEvents,
  type SubscriberBusPutEventsResult,
} from "../../functions/adapters/eventbridge/subscriber-bus";
import { AgentBusError } from "../../functions/core/errors";
import type { EventPublisher } from "../../functions/core/ports";
import { relay } from "../../functions/core/relay";
import { type Envelope, registry, type Topic } from "../../schemas";
import { taskStream } from "../support/factories";

const BUS =
  "arn:aws:events:us-east-1:111122223333:event-busv2/agentbus-dev-events/exampleid0123456789abcdef";
const noWait = async () => {};

/** A new bus that answers each call with `answer` (default: every entry published) and records it. */
class RecordingBus implements SubscriberBusClient {
  readonly calls: SubscriberBusPutEvents[] = [];
  constructor(
    private readonly answer: (
      request: SubscriberBusPutEvents,
      call: number,
    ) => SubscriberBusPutEventsResult = (r) => ({
      Entries: r.Entries.map((_, i) => ({ EventId: `e${i}`, SuccessCode: "PUBLISHED" })),
    }),
  ) {}
  async putEvents(request: SubscriberBusPutEvents) {
    this.calls.push(request);
    return this.answer(request, this.calls.length);
  }
}

describe("SubscriberBusPublisher", () => {
  it("puts each envelope on the topic's bus, grouped by its order key, de-duplicated by its id", async () => {
    const events = taskStream(1, 3);
    const bus = new RecordingBus();
    const failures = await new SubscriberBusPublisher(bus, { events: BUS }).publish(
      "events",
      events,
    );
    expect(failures).toEqual([]);
    expect(bus.calls).toHaveLength(1);
    expect(bus.calls[0]?.EventBusArn).toBe(BUS);
    expect(bus.calls[0]?.Entries).toEqual(
      events.map((e) => ({
        Source: "agentbus",
        DetailType: e.event_type,
        Detail: JSON.stringify(e),
        Time: new Date(e.occurred_at),
        SystemMetadata: { EventGroupId: e.order_key, DeduplicationId: e.event_id },
      })),
    );
  });

  it("counts DEDUPLICATED as published, and returns the failed entries by index", async () => {
    const events = taskStream(1, 3);
    const bus = new RecordingBus(() => ({
      FailedEntryCount: 1,
      Entries: [
        { SuccessCode: "DEDUPLICATED" },
        { ErrorCode: "ThrottlingException", ErrorMessage: "slow down" },
        { SuccessCode: "PUBLISHED" },
      ],
    }));
    const failures = await new SubscriberBusPublisher(bus, { events: BUS }).publish(
      "events",
      events,
    );
    expect(failures).toEqual([
      { eventId: events[1]?.event_id, code: "ThrottlingException", message: "slow down" },
    ]);
  });

  it("fails every entry when the results do not match the entries", async () => {
    const events = taskStream(1, 2);
    const bus = new RecordingBus(() => ({ FailedEntryCount: 1, Entries: [{ ErrorCode: "X" }] }));
    const failures = await new SubscriberBusPublisher(bus, { events: BUS }).publish(
      "events",
      events,
    );
    expect(failures.map((f) => f.eventId)).toEqual(events.map((e) => e.event_id));
  });

  it("throws transient for a throttled or failed call, permanent for a refused one", async () => {
    const failing = (error: object) =>
      new SubscriberBusPublisher(
        {
          putEvents: async () => {
            throw error;
          },
        },
        { events: BUS },
      ).publish("events", taskStream(1, 1));
    const classOf = async (error: object) =>
      failing(error).catch((e: AgentBusError) => [e.errorClass, e.code]);
    expect(
      await classOf(Object.assign(new Error("slow"), { name: "ThrottlingException" })),
    ).toEqual(["transient", "eventbridgev2.throttled"]);
    expect(await classOf(Object.assign(new Error("down"), { $fault: "server" }))).toEqual([
      "transient",
      "eventbridgev2.unavailable",
    ]);
    expect(
      await classOf(
        Object.assign(new Error("no"), { name: "AccessDeniedException", $fault: "client" }),
      ),
    ).toEqual(["permanent", "eventbridgev2.access_denied"]);
    await expect(
      new SubscriberBusPublisher(new RecordingBus(), {}).publish("events", taskStream(1, 1)),
    ).rejects.toBeInstanceOf(AgentBusError);
  });
});

describe("the relay with a new bus", () => {
  class Classic implements EventPublisher {
    readonly calls: { topic: Topic; ids: string[] }[] = [];
    async publish(topic: Topic, envelopes: readonly Envelope[]) {
      this.calls.push({ topic, ids: envelopes.map((e) => e.event_id) });
      return [];
    }
  }

  it("publishes to both buses, and retries an entry the new bus failed, in order, before the next call", async () => {
    const events = taskStream(1, 14);
    const second = events[1]?.event_id;
    const bus = new RecordingBus((request, call) => ({
      FailedEntryCount: call === 1 ? 1 : 0,
      Entries: request.Entries.map((e) =>
        call === 1 && e.SystemMetadata.DeduplicationId === second
          ? { ErrorCode: "InternalException", ErrorMessage: "again" }
          : { SuccessCode: "PUBLISHED" },
      ),
    }));
    const classic = new Classic();
    const publisher = new BothBusesPublisher(
      classic,
      new SubscriberBusPublisher(bus, { events: BUS }),
      new Set<Topic>(["events"]),
    );
    const report = await relay(events, registry, publisher, { wait: noWait });
    expect(report.retriedEntries).toBe(1);
    const published = bus.calls.map((c) => c.Entries.map((e) => e.SystemMetadata.DeduplicationId));
    // 10, then the failed one again, then the remaining 4: an order key never overtaken.
    expect(published).toEqual([
      events.slice(0, 10).map((e) => e.event_id),
      [second],
      events.slice(10).map((e) => e.event_id),
    ]);
    expect(
      new Set(bus.calls.flatMap((c) => c.Entries.map((e) => e.SystemMetadata.EventGroupId))),
    ).toEqual(new Set([events[0]?.order_key]));
    expect(classic.calls.map((c) => c.ids.length)).toEqual([10, 1, 4]);
  });

  it("a topic without a new bus goes to the classic bus only", async () => {
    const bus = new RecordingBus();
    const classic = new Classic();
    const publisher = new BothBusesPublisher(
      classic,
      new SubscriberBusPublisher(bus, { events: BUS }),
      new Set<Topic>(),
    );
    await publisher.publish("events", taskStream(1, 2));
    expect(bus.calls).toEqual([]);
    expect(classic.calls).toHaveLength(1);
  });
});
