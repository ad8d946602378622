import { unmarshall } from "@aws-sdk/util-dynamodb";
import { describe, expect, it } from "vitest";
import type { AwsClient, AwsCommand } from "../../functions/adapters/aws/client";
import { DynamoConsumerStore } from "../../functions/adapters/dynamodb/event-store";
import { eventItem } from "../../functions/adapters/dynamodb/items";
import { envelopesFromStreamRecords } from "../../functions/adapters/dynamodb/stream";
import { dispatch } from "../../functions/core/dispatch";
import { InMemoryEventStore } from "../../functions/core/memory";
import { consume } from "../../functions/core/pipeline";
import type {
  ConsumerDeps,
  DeadLetterSink,
  EventPublisher,
  FifoMessage,
  FifoSender,
} from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import { relay, typeTopicsOf } from "../../functions/core/relay";
import type { Role } from "../../functions/core/role";
import { defineModule } from "../../functions/core/role-module";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import { liveRedactedKeys } from "../../functions/handlers/log-redaction";
import { audit } from "../../functions/roles/audit/audit";
import { testRole } from "../../lib/dev/role-kit/test-role";
import { registryContext } from "../../lib/infra/topology";
import {
  defineEventType,
  type Envelope,
  EventRegistry,
  type EventTypeDefinition,
  registry,
  type Topic,
} from "../../schemas";
import { streamFact } from "../../schemas/events/kinds";
import * as z from "../../schemas/zod";
import { feedbackEvent, newUlid } from "../support/factories";
import { dynamoStreamRecord } from "../support/lambda-events";

/**
 * An application's own event type on the hub's functions: the producer's registry knows it, the
 * relay's and the dispatch's (the hub's registry) do not, and it still reaches the consumer that
 * knows it, on the bus its definition names.
 */

/** An application's type, on a topic its kind would not default to, known only to `appRegistry`. */
function entryRecordedDefinition() {
  return {
    ...streamFact,
    type: "ledgertest.entry_recorded",
    topic: "audit",
    description: "a ledger entry was recorded for a refund",
    payload: z.object({
      entry_id: z.string(),
      amount_cents: z.int(),
      memo: z.optional(z.string()),
    }),
    personal: ["memo"],
  } as const;
}

function appRegistryWith(definition: EventTypeDefinition = entryRecordedDefinition()) {
  const appRegistry = new EventRegistry();
  appRegistry.define(definition);
  return appRegistry;
}

/** A DynamoDB client that accepts every write and reads nothing: what a commit would write. */
class RecordingDynamo {
  readonly puts: Record<string, unknown>[] = [];
  readonly client: AwsClient = {
    send: async <I extends object, O extends object>(command: AwsCommand<I, O>) => {
      const input = command.input as {
        Item?: Parameters<typeof unmarshall>[0];
        TransactItems?: { Put?: { Item: Parameters<typeof unmarshall>[0] } }[];
      };
      if (command.operation === "PutItem" && input.Item) this.puts.push(unmarshall(input.Item));
      for (const action of input.TransactItems ?? [])
        if (action.Put) this.puts.push(unmarshall(action.Put.Item));
      return { $metadata: {} } as O & { $metadata: object };
    },
  };
}

class RecordingPublisher implements EventPublisher {
  readonly calls: { topic: Topic; envelopes: Envelope[] }[] = [];
  async publish(topic: Topic, envelopes: readonly Envelope[]) {
    this.calls.push({ topic, envelopes: [...envelopes] });
    return [];
  }
}

class RecordingSender implements FifoSender {
  readonly sent: FifoMessage[] = [];
  async send(messages: readonly FifoMessage[]) {
    this.sent.push(...messages);
    return [];
  }
}

class RecordingDeadLetters implements DeadLetterSink {
  readonly items: { code: string; reason: string }[] = [];
  async send(m: { body: string; code: string; reason: string }) {
    this.items.push({ code: m.code, reason: m.reason });
  }
}

const noWait = async () => {};

/** The application's consumer: it records each entry it is given. */
function bookRole(seen: unknown[]): Role<{ entries: number }> {
  return {
    group: "ledgertest-book",
    subscriptions: ["ledgertest.entry_recorded"],
    decide: (state, event) => {
      seen.push(event.payload);
      return { state: { entries: (state?.entries ?? 0) + 1 } };
    },
  };
}

/** The application's event, committed by its producer through the DynamoDB store: the item. */
async function committedItem(appRegistry: EventRegistry) {
  const clock = new ManualClock("2026-09-01T10:00:00.000Z");
  const dynamo = new RecordingDynamo();
  const store = new DynamoConsumerStore({
    client: dynamo.client,
    tables: { state: "state", events: "events", inbox: "inbox" },
    clock,
    registry: appRegistry,
  });
  const deps: ConsumerDeps = { store, registry: appRegistry, clock, ids: ulidSource(clock) };
  const [event] = await appendToStream(deps, {
    aggregate: { type: "ledger_book", id: "book_A-1001" },
    producer: "bookkeeper",
    correlationId: `corr_${newUlid()}`,
    taskId: `task_${newUlid()}`,
    decide: () => ({
      emit: [
        { type: "ledgertest.entry_recorded", payload: { entry_id: "rf_1", amount_cents: 8900 } },
      ],
    }),
  });
  // A stored event's id carries its correlation's digest: the item keeps it in stored_id.
  const item = dynamo.puts.find((put) => put.stored_id === event?.event_id);
  if (!event || !item) throw new Error("the commit wrote no event item");
  return { event, item };
}

describe("an application's event type on the hub's functions", () => {
  it("flows commit -> relay -> dispatch -> consume, the hub's functions knowing nothing of it", async () => {
    const appRegistry = appRegistryWith();
    expect(registry.has("ledgertest.entry_recorded")).toBe(false);
    const { event, item } = await committedItem(appRegistry);
    expect(item.topic).toBe("audit");

    const { envelopes, topics } = envelopesFromStreamRecords([dynamoStreamRecord(item)]);
    const publisher = new RecordingPublisher();
    await relay(envelopes, registry, publisher, { topics, wait: noWait });
    expect(publisher.calls.map((c) => c.topic)).toEqual(["audit"]);
    const published = publisher.calls[0]?.envelopes[0];

    const sender = new RecordingSender();
    const deadLetters = new RecordingDeadLetters();
    const report = await dispatch(
      [{ recordId: "r1", envelope: published, rawBody: JSON.stringify(published) }],
      registry,
      sender,
      deadLetters,
    );
    expect(deadLetters.items).toEqual([]);
    expect(report.sent).toBe(1);
    expect(sender.sent[0]).toMatchObject({
      groupId: "book_A-1001",
      deduplicationId: event.event_id,
    });

    const seen: unknown[] = [];
    const clock = new ManualClock("2026-09-01T10:00:01.000Z");
    const consumer: ConsumerDeps = {
      store: new InMemoryEventStore(clock),
      registry: appRegistry,
      clock,
      ids: ulidSource(clock),
    };
    const result = await consume(
      JSON.parse(sender.sent[0]?.body ?? "{}"),
      bookRole(seen),
      consumer,
    );
    expect(result.status).toBe("applied");
    expect(seen).toEqual([{ entry_id: "rf_1", amount_cents: 8900 }]);
  });

  it("publishes to the topic stored with the event, whatever the relay's registry says", async () => {
    const appRegistry = appRegistryWith();
    const { item } = await committedItem(appRegistry);
    // The relay's own registry knows the type, on another topic: the stored topic wins.
    const relayRegistry = appRegistryWith({ ...entryRecordedDefinition(), topic: "events" });
    const { envelopes, topics } = envelopesFromStreamRecords([dynamoStreamRecord(item)]);
    const publisher = new RecordingPublisher();
    await relay(envelopes, relayRegistry, publisher, { topics, wait: noWait });
    expect(publisher.calls.map((c) => c.topic)).toEqual(["audit"]);
  });

  it("publishes an event stored before topics were to its type's topic, and refuses an unknown one", async () => {
    const old = feedbackEvent();
    const { topic: _none, ...row } = eventItem(old);
    const read = envelopesFromStreamRecords([dynamoStreamRecord(row)]);
    expect(read.topics.size).toBe(0);
    const publisher = new RecordingPublisher();
    await relay(read.envelopes, registry, publisher, { topics: read.topics, wait: noWait });
    expect(publisher.calls.map((c) => c.topic)).toEqual(["events"]);
  });

  it("places an application's event stored without a topic by the stack's types; one it cannot place is named, the others published", async () => {
    const { event, item } = await committedItem(appRegistryWith());
    const { topic: _stored, ...before } = item;
    const known = feedbackEvent();
    const { topic: _none, ...knownRow } = eventItem(known);
    const read = envelopesFromStreamRecords([
      dynamoStreamRecord(before),
      dynamoStreamRecord(knownRow),
    ]);
    expect(read.topics.size).toBe(0);

    // The stack gave the relay its application types' topics (EVENT_TOPICS).
    const placed = new RecordingPublisher();
    const typeTopics = typeTopicsOf({ audit: ["ledgertest.entry_recorded"] });
    await relay(read.envelopes, registry, placed, { typeTopics, wait: noWait });
    expect(placed.calls.map((c) => [c.topic, c.envelopes.map((e) => e.event_id)])).toEqual([
      ["audit", [event.event_id]],
      ["events", [known.event_id]],
    ]);

    // A relay that does not know the type publishes the rest and names the one it left out.
    const publisher = new RecordingPublisher();
    const refused = relay(read.envelopes, registry, publisher, { wait: noWait });
    await expect(refused).rejects.toMatchObject({
      code: "relay.unknown_type",
      errorClass: "permanent",
      details: { unpublished: [event.event_id] },
    });
    await expect(refused).rejects.toThrow(
      /ledgertest\.entry_recorded@1.*failure queue.*agentbus republish --failures/,
    );
    expect(publisher.calls.map((c) => c.envelopes.map((e) => e.event_id))).toEqual([
      [known.event_id],
    ]);
  });

  it("stores no topic it does not know, and ignores a stored one that is not a topic", () => {
    const event = feedbackEvent();
    expect(eventItem(event)).not.toHaveProperty("topic");
    const read = envelopesFromStreamRecords([
      dynamoStreamRecord({ ...eventItem(event), topic: "nowhere" }),
    ]);
    expect(read.envelopes).toHaveLength(1);
    expect(read.topics.size).toBe(0);
  });

  it("dispatches an unknown type on its envelope's shape, and dead-letters a malformed one", async () => {
    const { event } = await committedItem(appRegistryWith());
    const sender = new RecordingSender();
    const deadLetters = new RecordingDeadLetters();
    const malformed = { ...event, event_id: "not-a-ulid", aggregate: { type: "Bad", id: "x" } };
    await dispatch(
      [
        { recordId: "ok", envelope: event, rawBody: "{}" },
        { recordId: "bad", envelope: malformed, rawBody: "{}" },
      ],
      registry,
      sender,
      deadLetters,
    );
    expect(sender.sent.map((m) => m.deduplicationId)).toEqual([event.event_id]);
    expect(deadLetters.items.map((d) => d.code)).toEqual(["envelope.invalid"]);
  });
});

describe("defineEventType and a role module's events", () => {
  it("registers a type once: the same definition again is harmless, another one is refused by name", () => {
    const definition = { ...entryRecordedDefinition(), type: "ledgertest.once" } as const;
    expect(defineEventType(definition)).toBe(definition);
    expect(defineEventType(definition)).toBe(definition);
    expect(registry.find("ledgertest.once")).toBe(definition);
    expect(() => defineEventType({ ...definition, description: "something else" })).toThrow(
      /ledgertest\.once@1 is defined twice/,
    );
  });

  it("registers the types a module owns when it is defined: the topology and the test kit know them", async () => {
    const owned = { ...entryRecordedDefinition(), type: "ledgertest.module_owned" } as const;
    const seen: unknown[] = [];
    const module = defineModule({
      descriptor: { group: "ledgertest-book", subscriptions: [owned.type] },
      entry: "test/core/application-events.test.ts",
      deployment: {},
      events: [owned],
      build: () => ({ ...bookRole(seen), subscriptions: [owned.type] }) as Role<unknown>,
    });
    expect(registry.find(owned.type)).toBe(owned);
    expect(registryContext().eventTypes).toContainEqual({
      type: owned.type,
      topic: "audit",
      personal: true,
      sequenced: true,
    });
    const t = testRole(module);
    const [event] = await t.append(
      { aggregate: { type: "ledger_book", id: "book_A-1" }, taskId: `task_${newUlid()}` },
      { type: owned.type, payload: { entry_id: "rf_2", amount_cents: 100 } } as never,
    );
    if (!event) throw new Error("nothing appended");
    expect((await t.deliver(event)).status).toBe("applied");
    expect(seen).toEqual([{ entry_id: "rf_2", amount_cents: 100 }]);
  });

  it("has the audit group record a type defined after the audit role was made", () => {
    const before = audit.subscriptions;
    expect(before).not.toContain("ledgertest.audited");
    defineEventType({ ...entryRecordedDefinition(), type: "ledgertest.audited" });
    expect(audit.subscriptions).toEqual([...before, "ledgertest.audited"]);
    expect(audit.subscriptions).toBe(audit.subscriptions);
  });

  it("keeps an application's personal fields out of the logs, however late it defines them", () => {
    const appRegistry = new EventRegistry();
    const keys = liveRedactedKeys(appRegistry);
    expect(keys().has("memo")).toBe(false);
    appRegistry.define(entryRecordedDefinition());
    expect(keys().has("memo")).toBe(true);
  });
});
