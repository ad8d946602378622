import { describe, expect, it } from "vitest";
import {
  type DirectGroup,
  deliverDirectly,
  type PlacedEvent,
  takes,
} from "../../functions/core/direct-delivery";
import { dispatch, fifoMessageOf, messageGroupOf } from "../../functions/core/dispatch";
import type { FifoMessage, FifoSender } from "../../functions/core/ports";
import { relay } from "../../functions/core/relay";
import { type Envelope, registry } from "../../schemas";
import { taskStream } from "../support/factories";

const noWait = async () => {};

/** A FIFO queue that records each call and refuses the entries of ids given to fail, once each. */
class RecordingQueue implements FifoSender {
  calls: FifoMessage[][] = [];
  constructor(private readonly failOnce = new Set<string>()) {}
  async send(messages: readonly FifoMessage[]) {
    this.calls.push([...messages]);
    return messages
      .filter((m) => this.failOnce.delete(m.deduplicationId))
      .map((m) => ({ id: m.id, code: "InternalError", message: "try again" }));
  }
}

const group = (name: string, types: readonly string[]): DirectGroup => ({
  group: name,
  queue: `agentbus-test-${name}.fifo`,
  rules: { events: { "detail-type": [...types] } },
});
const placed = (events: readonly Envelope[]): PlacedEvent[] =>
  events.map((envelope) => ({ topic: "events", envelope }));

describe("a group delivered by the relay", () => {
  it("takes the events of its rule's types on its rule's topic, and no others", () => {
    const [accepted, started] = taskStream(1, 2);
    if (!accepted || !started) throw new Error("no events");
    const projection = group("task-projection", [accepted.event_type]);
    expect(takes(projection, { topic: "events", envelope: accepted })).toBe(true);
    expect(takes(projection, { topic: "events", envelope: started })).toBe(false);
    expect(takes(projection, { topic: "commands", envelope: accepted })).toBe(false);
  });

  it("gets each event its rule takes as the dispatch function sends it, in stream order, in calls of at most 10", async () => {
    const events = taskStream(1, 23);
    const types = [...new Set(events.map((e) => e.event_type))];
    const all = group("all", types);
    const some = group("some", [types[0] as string]);
    const queues = new Map([
      ["all", new RecordingQueue()],
      ["some", new RecordingQueue()],
    ]);
    const report = await deliverDirectly(placed(events), {
      groups: [all, some],
      senderOf: (g) => queues.get(g.group) as RecordingQueue,
      wait: noWait,
    });
    const allQueue = queues.get("all") as RecordingQueue;
    expect(allQueue.calls.map((c) => c.length)).toEqual([10, 10, 3]);
    expect(allQueue.calls.flat().map(({ id: _, ...m }) => m)).toEqual(
      events.map((e) => fifoMessageOf(e)),
    );
    const someSent = (queues.get("some") as RecordingQueue).calls.flat();
    expect(someSent.map((m) => m.deduplicationId)).toEqual(
      events.filter((e) => e.event_type === types[0]).map((e) => e.event_id),
    );
    expect(report.delivered).toBe(events.length + someSent.length);
  });

  it("with tenant lanes, sends each tenant's events in the lane its dispatch function picks", async () => {
    // Three tasks of each of two tenants: each task's events fall in one of its tenant's 2 lanes.
    const events = ["acme", "globex"].flatMap((tenant_id) =>
      [1, 2, 3].flatMap(() => taskStream(1, 3).map((e) => ({ ...e, tenant_id }))),
    );
    const types = [...new Set(events.map((e) => e.event_type))];
    const laned: DirectGroup = { ...group("laned", types), tenantConcurrency: 2 };
    const queue = new RecordingQueue();
    await deliverDirectly(placed(events), {
      groups: [laned],
      senderOf: () => queue,
      wait: noWait,
    });
    const sent = queue.calls.flat();
    expect(sent.map((m) => m.groupId)).toEqual(events.map((e) => messageGroupOf(e, 2)));
    for (const { groupId } of sent) expect(groupId).toMatch(/^tenant\/(acme|globex)\/[01]$/);
    expect(new Set(sent.map((m) => m.groupId.split("/")[1]))).toEqual(new Set(["acme", "globex"]));

    // The dispatch function, given the same envelopes from the group's buffer, picks the same lanes.
    const dispatched: FifoMessage[] = [];
    const report = await dispatch(
      events.map((e, i) => ({ recordId: String(i), envelope: e, rawBody: JSON.stringify(e) })),
      registry,
      {
        send: async (m) => {
          dispatched.push(...m);
          return [];
        },
      },
      { send: async () => {} },
      2,
    );
    expect(report).toMatchObject({ sent: events.length, deadLettered: 0 });
    const asSent = ({ groupId, deduplicationId, body }: FifoMessage) => ({
      groupId,
      deduplicationId,
      envelope: JSON.parse(body),
    });
    expect(sent.map(asSent)).toEqual(dispatched.map(asSent));
  });

  it("retries only the entries that failed, before the next call, so an aggregate keeps its order", async () => {
    const events = taskStream(1, 12);
    const failing = events[3] as Envelope;
    const queue = new RecordingQueue(new Set([failing.event_id]));
    const types = [...new Set(events.map((e) => e.event_type))];
    const report = await deliverDirectly(placed(events), {
      groups: [group("g", types)],
      senderOf: () => queue,
      wait: noWait,
    });
    expect(queue.calls.map((c) => c.map((m) => m.deduplicationId))).toEqual([
      events.slice(0, 10).map((e) => e.event_id),
      [failing.event_id],
      events.slice(10).map((e) => e.event_id),
    ]);
    expect(report).toMatchObject({ delivered: 12, calls: 3, retriedEntries: 1 });
  });

  it("fails the batch back to the stream when a send keeps failing, naming every event of it", async () => {
    const events = taskStream(1, 3);
    const down: FifoSender = {
      send: async () => {
        throw new Error("connection reset");
      },
    };
    const types = [...new Set(events.map((e) => e.event_type))];
    const failure = deliverDirectly(placed(events), {
      groups: [group("g", types)],
      senderOf: () => down,
      wait: noWait,
      maxAttempts: 2,
    });
    await expect(failure).rejects.toMatchObject({
      code: "relay.delivery_failed",
      errorClass: "transient",
      details: { group: "g", unpublished: events.map((e) => e.event_id) },
    });
  });

  it("is sent by the relay whether its type is published or not, and only published types reach the bus", async () => {
    const events = taskStream(1, 4);
    const [first] = events;
    if (!first) throw new Error("no events");
    const published: string[] = [];
    const queue = new RecordingQueue();
    const report = await relay(
      events,
      registry,
      {
        publish: async (_topic, envelopes) => {
          published.push(...envelopes.map((e) => e.event_id));
          return [];
        },
      },
      {
        unpublished: new Set([first.event_type]),
        direct: {
          groups: [group("g", [first.event_type])],
          senderOf: () => queue,
          wait: noWait,
        },
      },
    );
    expect(queue.calls.flat().map((m) => m.deduplicationId)).toEqual(
      events.filter((e) => e.event_type === first.event_type).map((e) => e.event_id),
    );
    expect(published).toEqual(
      events.filter((e) => e.event_type !== first.event_type).map((e) => e.event_id),
    );
    expect(report.direct?.delivered).toBe(queue.calls.flat().length);
  });
});
