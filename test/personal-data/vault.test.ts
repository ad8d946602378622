import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
// The customer-support application's event types, which its role modules would define.
import "../../functions/roles/customer-support/events/index";
import { InMemoryEventStore } from "../../functions/core/memory";
import { InMemoryCustomerKeys } from "../../functions/core/personal-data/customer-keys";
import { localKeyWrapping } from "../../functions/core/personal-data/local-key-wrapping";
import { ERASED, isSealed, Vault } from "../../functions/core/personal-data/vault";
import { ManualClock } from "../../functions/core/runtime";
import { type Envelope, EventRegistry, registry } from "../../schemas";
import * as z from "../../schemas/zod";

/** Personal fields sealed in the event store under a customer's key, and erased with it. */

const MARKER = "MARKER-vault-5f3a";
const conversation = "conv_01KB0R7Q2M5N8P1R4T6V9X2Z3A";

function accepted(version: number, text: string, overrides: Partial<Envelope> = {}): Envelope {
  return {
    event_id: ulid(),
    event_type: "conversation.message.accepted",
    schema_version: 1,
    occurred_at: "2026-12-02T10:00:00.000Z",
    correlation_id: `corr_${ulid()}`,
    causation_id: null,
    task_id: `task_${ulid()}`,
    conversation_id: conversation,
    aggregate: { type: "conversation", id: conversation, version },
    order_key: conversation,
    producer: "conversation",
    payload: {
      conversation_id: conversation,
      customer_id: "cust_alice",
      channel: "chat",
      text,
      message_event_id: ulid(),
      version,
    },
    ...overrides,
  } as Envelope;
}

function generated(version: number, text: string): Envelope {
  const task = `task_${ulid()}`;
  return {
    ...accepted(version, text),
    event_type: "reply.generated",
    aggregate: { type: "reply", id: task, version },
    task_id: task,
    payload: {
      conversation_id: conversation,
      reply_text: text,
      confidence: 0.9,
      requires_human_review: false,
      source_refs: [],
    },
  } as Envelope;
}

function world() {
  const clock = new ManualClock("2026-12-02T10:00:00.000Z");
  const keys = new InMemoryCustomerKeys();
  const wrapping = localKeyWrapping();
  const vault = (cacheMs?: number) =>
    new Vault({
      keys,
      wrapping,
      now: () => clock.now(),
      ...(cacheMs ? { cache: { maxAgeMs: cacheMs } } : {}),
    });
  const store = new InMemoryEventStore(clock, vault());
  return { clock, keys, wrapping, vault, store };
}

const stored = (store: InMemoryEventStore) => JSON.stringify(store.log);
const field = (event: Envelope | undefined, name: string) =>
  (event?.payload as Record<string, unknown> | undefined)?.[name];

describe("the vault", () => {
  it("stores a message's text sealed and reads it back whole", async () => {
    const { store } = world();
    const event = accepted(1, `Where is my refund? ${MARKER}`);
    await store.commit({ append: [event] });
    expect(stored(store)).not.toContain(MARKER);
    expect(isSealed(field(store.log[0], "text"))).toBe(true);
    const [read] = await store.readStream(event.aggregate, 1, 1);
    expect(read).toEqual(event);
    expect(registry.parse(read).ok).toBe(true);
  });

  it("seals a reply, which names no customer, under its conversation's owner", async () => {
    const { store, keys } = world();
    await store.commit({ append: [accepted(1, "hello")] });
    const reply = generated(1, `Your refund is on its way ${MARKER}`);
    await store.commit({ append: [reply] });
    expect(stored(store)).not.toContain(MARKER);
    const owner = await keys.ownerOf(conversation);
    expect(owner).toEqual({ tenant: "default", customer: "cust_alice" });
    expect(await keys.conversationsOf({ tenant: "default", customer: "cust_alice" })).toEqual([
      conversation,
    ]);
    expect(await store.eventsByTask(reply.task_id)).toEqual([reply]);
  });

  it("opens a sealed field of a type its own registry does not know (a hub function's)", async () => {
    const { keys, wrapping, store } = world();
    const event = accepted(1, `Where is my refund? ${MARKER}`);
    await store.commit({ append: [event] });
    const [sealed] = store.log;
    expect(isSealed(field(sealed, "text"))).toBe(true);
    // A registry that knows none of the application's types, as the relay's does not.
    const hubOnly = new Vault({ keys, wrapping, registry: new EventRegistry() });
    const opened = await hubOnly.open(sealed as Envelope);
    expect(field(opened, "text")).toBe(`Where is my refund? ${MARKER}`);
    // Nor does it seal one: sealing is the committing function's, which knows the type.
    expect(await hubOnly.seal(accepted(2, MARKER))).toMatchObject({ payload: { text: MARKER } });
  });

  it("seals a kept message under its customer's key without claiming its conversation", async () => {
    const { keys, vault } = world();
    const message = accepted(1, `kept ${MARKER}`);
    const sealed = await vault().sealCommit({
      inbox: {
        group: "audit",
        eventId: message.event_id,
        eventType: message.event_type,
        outcome: "applied",
        aggregate: message.aggregate,
        version: message.aggregate.version,
        correlationId: message.correlation_id,
        taskId: message.task_id,
        producer: message.producer,
        occurredAt: message.occurred_at,
        recordedAt: "2026-12-02T10:00:00.000Z",
        expiresAt: 1_900_000_000,
        envelope: message,
      },
    });
    expect(isSealed(field(sealed.inbox?.envelope, "text"))).toBe(true);
    expect(JSON.stringify(sealed)).not.toContain(MARKER);
    // The conversation is claimed, and listed, where its events are stored.
    expect(await keys.ownerOf(conversation)).toBeUndefined();
    const alice = await keys.customer({ tenant: "default", customer: "cust_alice" });
    expect(await keys.conversationsOf({ tenant: "default", customer: "cust_alice" })).toEqual([]);
    expect(alice?.key).toBeDefined();
  });

  it("leaves plain an event of a conversation no customer claimed", async () => {
    const { store } = world();
    const reply = generated(1, `plain ${MARKER}`);
    await store.commit({ append: [reply] });
    expect(stored(store)).toContain(MARKER);
  });

  it("reads [erased] once the customer's key is deleted, the rest of the event intact", async () => {
    const { store, keys, vault, clock } = world();
    const message = accepted(1, `secret ${MARKER}`);
    const reply = generated(1, `answer ${MARKER}`);
    await store.commit({ append: [message] });
    await store.commit({ append: [reply] });
    const subject = { tenant: "default", customer: "cust_alice" };
    const keyId = (await keys.customer(subject))?.key?.keyId ?? "";
    expect(await keys.eraseKey(subject, keyId, { at: clock.now().toISOString(), by: "ops" })).toBe(
      true,
    );
    // Another container reads the erasure at once; the one that sealed, once its cache ends.
    const fresh = new InMemoryEventStore(clock, vault());
    Object.assign(fresh, { log: store.log, streams: store.streams });
    const [read] = await fresh.readStream(message.aggregate, 1, 1);
    expect(read?.payload).toEqual({ ...(message.payload as object), text: ERASED });
    expect(registry.parse(read).ok).toBe(true);
    const [readReply] = await fresh.eventsByTask(reply.task_id);
    expect(field(readReply, "reply_text")).toBe(ERASED);
    clock.advance(5 * 60_000 + 1);
    const [late] = await store.readStream(message.aggregate, 1, 1);
    expect(field(late, "text")).toBe(ERASED);
    expect(await keys.eraseKey(subject, keyId, { at: "x", by: "ops" })).toBe(false);
  });

  it("seals what a customer writes after an erasure under a new key", async () => {
    const { store, keys, clock } = world();
    await store.commit({ append: [accepted(1, "before")] });
    const subject = { tenant: "default", customer: "cust_alice" };
    const first = (await keys.customer(subject))?.key?.keyId ?? "";
    await keys.eraseKey(subject, first, { at: clock.now().toISOString(), by: "ops" });
    clock.advance(5 * 60_000 + 1);
    await store.commit({ append: [accepted(2, "after")] });
    const second = (await keys.customer(subject))?.key?.keyId;
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
    const texts = (await store.readStream({ type: "conversation", id: conversation }, 1, 2)).map(
      (e) => (e.payload as { text: string }).text,
    );
    expect(texts).toEqual([ERASED, "after"]);
  });

  it("keeps a message kept whole in an inbox row sealed, and opens it for the trace", async () => {
    const { store } = world();
    const message = {
      ...accepted(0, `kept ${MARKER}`),
      event_type: "conversation.message.received",
      payload: { text: `kept ${MARKER}`, customer_id: "cust_alice", channel: "chat" },
    } as Envelope;
    await store.commit({
      inbox: {
        group: "audit",
        eventId: message.event_id,
        eventType: message.event_type,
        aggregate: message.aggregate,
        version: 0,
        correlationId: message.correlation_id,
        taskId: message.task_id,
        producer: "cli",
        occurredAt: message.occurred_at,
        recordedAt: message.occurred_at,
        expiresAt: Number.MAX_SAFE_INTEGER,
        outcome: "applied",
        envelope: message,
      },
    });
    expect(JSON.stringify([...store.inbox.values()])).not.toContain(MARKER);
    const [row] = await store.inboxRecords("audit", [message.event_id]);
    expect(row?.envelope).toEqual(message);
  });

  it("refuses a sealed field that was altered", async () => {
    const { store, vault: vaultOf } = world();
    await store.commit({ append: [accepted(1, "hello")] });
    const sealed = String(field(store.log[0], "text"));
    const altered = `${sealed.slice(0, -6)}AAAA==`;
    const vault = vaultOf();
    await expect(
      vault.open({ ...accepted(1, "x"), payload: { text: altered } } as Envelope),
    ).rejects.toThrow(/does not open|malformed/);
  });

  it("refuses a value that only looks sealed without quoting it: it may be a customer's words", async () => {
    const { vault: vaultOf } = world();
    const lookalike = "sealed:v1:my card is 4111 1111 1111 1111";
    const opened = vaultOf().open({
      ...accepted(1, "x"),
      payload: { text: lookalike },
    } as Envelope);
    await expect(opened).rejects.toMatchObject({ code: "personal.malformed" });
    await expect(opened).rejects.not.toThrow(/4111/);
  });

  it("names a declared personal field the payload does not have at definition", () => {
    const own = new EventRegistry();
    expect(() =>
      own.define({
        type: "sample.event",
        schemaVersion: 1,
        kind: "event",
        topic: "events",
        sequenced: true,
        description: "a sample",
        payload: z.object({ text: z.string() }),
        personal: ["body"],
      }),
    ).toThrow(/personal field "body", which its payload does not have/);
  });
});
