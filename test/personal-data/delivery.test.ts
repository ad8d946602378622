import fc from "fast-check";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import "../../functions/roles/customer-support/events/index";
import type { AgentBusError } from "../../functions/core/errors";
import { InMemoryEventStore } from "../../functions/core/memory";
import { InMemoryCustomerKeys } from "../../functions/core/personal-data/customer-keys";
import type { KeyWrapping } from "../../functions/core/personal-data/key-wrapping";
import { localKeyWrapping } from "../../functions/core/personal-data/local-key-wrapping";
import { ERASED, isSealed, KEY_CACHE_MS, Vault } from "../../functions/core/personal-data/vault";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps } from "../../functions/core/ports";
import type { Role } from "../../functions/core/role";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import { type Envelope, registry } from "../../schemas";

/**
 * Personal fields travel sealed (buses, archives, queues, dead letters): the pipeline opens those a
 * role reads (Role.readsPersonal) with the customer's key, once per message; a role that does not
 * read them never opens them; an erased customer's read `[erased]`, never an error.
 */

const MARKER = "MARKER-delivery-7d2e";
const TYPE = "conversation.message.accepted";
const SUBJECT = { tenant: "default", customer: "cust_alice" };

interface Seen {
  readonly texts: readonly unknown[];
}

/** A role that keeps every text it is given, reading the personal fields or not. */
function keeper(group: string, reads: boolean): Role<Seen> {
  return {
    group,
    subscriptions: [TYPE],
    ...(reads ? { readsPersonal: [TYPE] } : {}),
    decide: (state, event) => ({
      state: { texts: [...(state?.texts ?? []), (event.payload as { text: unknown }).text] },
    }),
  };
}

function accepted(conversation: string, version: number, text: string): Envelope {
  return {
    event_id: ulid(),
    event_type: TYPE,
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
      customer_id: SUBJECT.customer,
      channel: "chat",
      text,
      message_event_id: ulid(),
      version,
    },
  } as Envelope;
}

/** A key wrapping that counts its calls (KMS requests in AWS). */
function counted(inner: KeyWrapping) {
  const calls = { newKey: 0, unwrap: 0 };
  const wrapping: KeyWrapping = {
    newKey: (context) => {
      calls.newKey++;
      return inner.newKey(context);
    },
    unwrap: (wrapped, context) => {
      calls.unwrap++;
      return inner.unwrap(wrapped, context);
    },
  };
  return { wrapping, calls };
}

function world() {
  const clock = new ManualClock("2026-12-02T10:00:00.000Z");
  const keys = new InMemoryCustomerKeys();
  const local = localKeyWrapping();
  /** The committing function's vault: what sealed the fields the bus carries. */
  const sealer = new Vault({ keys, wrapping: local, now: () => clock.now() });
  /** The consumer's store holds what it is given, sealed as the event store keeps it. */
  const store = new InMemoryEventStore(clock);
  const consumer = counted(local);
  const vault = new Vault({ keys, wrapping: consumer.wrapping, now: () => clock.now() });
  const deps: ConsumerDeps = {
    store,
    registry,
    clock,
    ids: ulidSource(clock),
    personalData: vault,
  };
  // Each case gives a conversation to one role: its state is the conversation's aggregate.
  const textsOf = async (_group: string, conversation: string) =>
    (
      (await store.load({ state: { type: "conversation", id: conversation } })).state?.data as
        | Seen
        | undefined
    )?.texts;
  const erase = async () => {
    const keyId = (await keys.customer(SUBJECT))?.key?.keyId ?? "";
    expect(await keys.eraseKey(SUBJECT, keyId, { at: clock.now().toISOString(), by: "ops" })).toBe(
      true,
    );
  };
  return { clock, keys, sealer, store, deps, calls: consumer.calls, textsOf, erase };
}

/** The message as the bus carries it: JSON, its personal fields sealed. */
async function onTheBus(sealer: Vault, event: Envelope): Promise<unknown> {
  return JSON.parse(JSON.stringify(await sealer.seal(event)));
}

const texts = fc
  .string({ minLength: 1, maxLength: 300 })
  .map((s) => `${MARKER} ${s}`.trim())
  .filter((s) => s.length <= 4000);

describe("personal fields on the way to a consumer", () => {
  it("a sealed field round-trips to a role that reads it, and is not in the message it came in", async () => {
    await fc.assert(
      fc.asyncProperty(texts, async (text) => {
        const w = world();
        const conversation = `conv_${ulid()}`;
        const raw = await onTheBus(w.sealer, accepted(conversation, 1, text));
        expect(JSON.stringify(raw)).not.toContain(MARKER);
        const result = await consume(raw, keeper("reader", true), w.deps);
        expect(result.status).toBe("applied");
        expect(await w.textsOf("reader", conversation)).toEqual([text]);
      }),
      { numRuns: 40 },
    );
  });

  it("an erased customer's field never opens: it reads [erased] and the message is handled", async () => {
    await fc.assert(
      fc.asyncProperty(texts, fc.boolean(), async (text, warm) => {
        const w = world();
        const conversation = `conv_${ulid()}`;
        const first = await onTheBus(w.sealer, accepted(conversation, 1, text));
        const second = await onTheBus(w.sealer, accepted(conversation, 2, text));
        // A warm function has the key cached; the erasure reaches it once the cache's age is past.
        if (warm) await consume(first, keeper("reader", true), w.deps);
        await w.erase();
        if (warm) w.clock.advance(KEY_CACHE_MS);
        const result = await consume(warm ? second : first, keeper("reader", true), w.deps);
        expect(result.status).toBe("applied");
        const seen = await w.textsOf("reader", conversation);
        expect(seen?.at(-1)).toBe(ERASED);
      }),
      { numRuns: 30 },
    );
  });

  it("a warm function opens an erased customer's field for at most KEY_CACHE_MS after the erasure", async () => {
    const w = world();
    const conversation = `conv_${ulid()}`;
    const reader = keeper("reader", true);
    const bus = await Promise.all(
      [1, 2, 3].map((v) => onTheBus(w.sealer, accepted(conversation, v, `${MARKER} ${v}`))),
    );
    await consume(bus[0], reader, w.deps);
    await w.erase();
    w.clock.advance(KEY_CACHE_MS - 1);
    await consume(bus[1], reader, w.deps);
    w.clock.advance(1);
    await consume(bus[2], reader, w.deps);
    expect(await w.textsOf("reader", conversation)).toEqual([`${MARKER} 1`, `${MARKER} 2`, ERASED]);
  });

  it("a role that does not read them gets them sealed, as they came, and never opens one", async () => {
    const w = world();
    const conversation = `conv_${ulid()}`;
    const raw = (await onTheBus(w.sealer, accepted(conversation, 1, `${MARKER} hi`))) as Envelope;
    const result = await consume(raw, keeper("passer", false), w.deps);
    expect(result.status).toBe("applied");
    const [text] = (await w.textsOf("passer", conversation)) ?? [];
    expect(isSealed(text)).toBe(true);
    expect(text).toBe((raw.payload as { text: string }).text);
    expect(w.calls).toEqual({ newKey: 0, unwrap: 0 });
  });

  it("holds a sealed text to its field's schema no more than [erased]: a text at the limit passes sealed", async () => {
    const w = world();
    const longest = async () => onTheBus(w.sealer, accepted(`conv_${ulid()}`, 1, "x".repeat(4000)));
    const [passed, read] = [await longest(), await longest()];
    expect(((passed as Envelope).payload as { text: string }).text.length).toBeGreaterThan(4000);
    expect((await consume(passed, keeper("passer", false), w.deps)).status).toBe("applied");
    expect((await consume(read, keeper("reader", true), w.deps)).status).toBe("applied");
  });

  it("opens a gap's stored events for a role that reads them, and only for it", async () => {
    const w = world();
    const conversation = `conv_${ulid()}`;
    const events = await Promise.all(
      [1, 2, 3].map(async (v) => w.sealer.seal(accepted(conversation, v, `${MARKER} ${v}`))),
    );
    await w.store.commit({ append: events });
    const last = JSON.parse(JSON.stringify(events[2]));
    const read = await consume(last, keeper("reader", true), w.deps);
    expect(read.steps.map((s) => s.status)).toEqual(["applied", "applied", "applied"]);
    expect(await w.textsOf("reader", conversation)).toEqual([1, 2, 3].map((v) => `${MARKER} ${v}`));
  });

  it("reads a customer's key once for many messages (one KMS request, not one per step)", async () => {
    const w = world();
    const conversation = `conv_${ulid()}`;
    const reader = keeper("reader", true);
    for (let v = 1; v <= 20; v++)
      await consume(
        await onTheBus(w.sealer, accepted(conversation, v, `${MARKER} ${v}`)),
        reader,
        w.deps,
      );
    expect((await w.textsOf("reader", conversation))?.length).toBe(20);
    expect(w.calls.unwrap).toBe(1);
  });

  it("refuses a field sealed for another tenant than the message's: a permanent error", async () => {
    const w = world();
    const raw = (await onTheBus(w.sealer, accepted(`conv_${ulid()}`, 1, MARKER))) as Envelope;
    const foreign = { ...raw, tenant_id: "acme" };
    const failure = await consume(foreign, keeper("reader", true), w.deps).catch(
      (error: AgentBusError) => error,
    );
    expect(failure).toMatchObject({ code: "personal.foreign_tenant", errorClass: "permanent" });
  });
});
