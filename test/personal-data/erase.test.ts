import { describe, expect, it } from "vitest";
import { type AgentJournal, journalContent } from "../../functions/core/agent/agent";
import { InMemoryCustomerKeys } from "../../functions/core/personal-data/customer-keys";
import { eraseCustomer } from "../../functions/core/personal-data/erase";
import { localKeyWrapping } from "../../functions/core/personal-data/local-key-wrapping";
import { ERASED, KEY_CACHE_MS, Vault } from "../../functions/core/personal-data/vault";
import { CONVERSATION_AGGREGATE } from "../../functions/roles/customer-support/conversation/conversation";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { clientMessage } from "../core/fixtures";
import { newConversationId, ofType, supportHarness } from "../core/support-fixture";

/** Erasing a customer on the support roles in memory: what is stored and what derives from it. */

const MARKER = "MARKER-erase-9b2e";
const alice = { tenant: "default", customer: "cust_alice" };

function erasable() {
  const keys = new InMemoryCustomerKeys();
  const wrapping = localKeyWrapping();
  const h = supportHarness({
    vault: (clock) => new Vault({ keys, wrapping, now: () => clock.now() }),
  });
  const erase = (subject = alice) =>
    eraseCustomer(
      {
        keys,
        store: h.store,
        states: {
          loadStates: (refs) => h.store.loadStates(refs),
          rewriteState: (state, data) => h.store.rewriteState(state, data),
        },
        roles: ROLE_MODULES.map((m) => m.descriptor),
        conversationType: CONVERSATION_AGGREGATE,
        content: h.content,
      },
      subject,
      { at: h.clock.now().toISOString(), by: "ops", reason: "asked by the customer" },
    );
  return { h, keys, erase };
}

/** Everything the in-memory store holds, as text. */
const everything = (h: ReturnType<typeof erasable>["h"]) =>
  JSON.stringify({
    log: h.store.log,
    states: [...h.store.states.values()],
    inbox: [...h.store.inbox.values()],
    content: [...h.content.texts.values()],
  });

describe("erasing a customer", () => {
  it("leaves the customer's words nowhere readable, and the conversation going on", async () => {
    const { h, erase } = erasable();
    const conversation = newConversationId();
    await h.drain([clientMessage(conversation, `Where is order 123? ${MARKER}`)]);
    await h.drain([clientMessage(conversation, `And order A-1001? ${MARKER}`)]);
    // Sealed in the event store; plain in the states derived from it.
    expect(JSON.stringify(h.store.log)).not.toContain(MARKER);
    expect(everything(h)).toContain(MARKER);
    expect(ofType(h.emitted, "notification.delivered").length).toBeGreaterThan(0);

    const report = await erase();
    expect(report).toMatchObject({ outcome: "erased", conversations: 1 });
    expect(report.overwritten).toBeGreaterThanOrEqual(3);
    expect(everything(h)).not.toContain(MARKER);

    const view = await h.view(conversation);
    const turns = Object.values(view?.turns ?? {});
    expect(turns.map((t) => t.text)).toEqual([ERASED, ERASED]);
    // The store's vault keeps a key it used for KEY_CACHE_MS, as a warm function would.
    h.clock.advance(KEY_CACHE_MS + 1);
    const stream = await h.store.readStream({ type: "conversation", id: conversation }, 1, 9);
    const accepted = ofType(stream, "conversation.message.accepted");
    expect(accepted.map((e) => (e.payload as { text: string }).text)).toEqual([ERASED, ERASED]);

    // The customer writes again: answered as before, the new words readable, the old ones not.
    await h.drain([clientMessage(conversation, "Is order 123 shipped now?")]);
    const after = await h.view(conversation);
    expect(Object.values(after?.turns ?? {}).map((t) => t.text)).toEqual([
      ERASED,
      ERASED,
      "Is order 123 shipped now?",
    ]);
    expect(ofType(h.emitted, "notification.delivered")).toHaveLength(3);
    expect(h.log.filter((l) => l.status.startsWith("error"))).toEqual([]);
  });

  it("erases the refund agent's run and its messages", async () => {
    const { h, erase } = erasable();
    await h.drain([clientMessage(newConversationId(), `Please refund order A-1002, ${MARKER}`)]);
    // The refund is above what the agent may make alone: the run waits for a person's approval.
    expect(ofType(h.emitted, "refund.review.needs_person")).toHaveLength(1);
    expect(JSON.stringify([...h.content.texts.values()])).toContain(MARKER);
    const report = await erase();
    expect(report.outcome).toBe("erased");
    expect(everything(h)).not.toContain(MARKER);
    const run = [...h.store.states.values()].find((s) => s.aggregate.type === "agent_run");
    expect(run?.data).toMatchObject({ status: "BLOCKED", waiting: { reason: ERASED } });
    for (const text of h.content.texts.values()) expect(() => JSON.parse(text)).not.toThrow();
  });

  it("erases a customer whose refund question a newer message superseded before its review began", async () => {
    const { h, erase } = erasable();
    const conversation = newConversationId();
    // Both messages are accepted before the first turn's review is delivered: it is superseded.
    await h.drain([
      clientMessage(conversation, `Please refund order A-1002, ${MARKER}`),
      clientMessage(conversation, "It is the rain jacket."),
    ]);
    expect(h.log).toContainEqual({
      group: "refund-review",
      type: "refund.review.requested",
      status: "discarded",
      reason: "superseded",
    });
    expect((await erase()).outcome).toBe("erased");
    expect(everything(h)).not.toContain(MARKER);
  });

  it("changes nothing the second time, and knows no customer it never saw", async () => {
    const { h, erase } = erasable();
    await h.drain([clientMessage(newConversationId(), `hello ${MARKER}`)]);
    expect((await erase()).outcome).toBe("erased");
    const before = everything(h);
    const again = await erase();
    expect(again).toMatchObject({ outcome: "already_erased", overwritten: 0 });
    expect(again.erasure).toMatchObject({ by: "ops", reason: "asked by the customer" });
    expect(everything(h)).toBe(before);
    expect(await erase({ tenant: "default", customer: "cust_nobody" })).toMatchObject({
      outcome: "unknown",
      conversations: 0,
    });
  });

  it("erases one customer and leaves another's conversation readable", async () => {
    const { h, erase } = erasable();
    const theirs = newConversationId();
    await h.drain([clientMessage(newConversationId(), `mine ${MARKER}`)]);
    await h.drain([clientMessage(theirs, "Where is order 456?", { customer: "cust_bob" })]);
    await erase();
    const view = await h.view(theirs);
    expect(Object.values(view?.turns ?? {}).map((t) => t.text)).toEqual(["Where is order 456?"]);
    expect(everything(h)).not.toContain(MARKER);
  });
});

describe("erasing a customer whose runs hold the same texts as another's", () => {
  it("leaves the other customer's run reading what it stored", async () => {
    const { h, erase } = erasable();
    const bobsTexts = async () => {
      const run = [...h.store.states.values()].find(
        (s) => s.aggregate.type === "agent_run" && JSON.stringify(s.data).includes("cust_bob"),
      );
      if (!run) throw new Error("bob's refund run is not stored");
      const refs = await journalContent(run.data as AgentJournal, h.content);
      return h.content.getMany(refs);
    };
    // Both ask in the same words: their runs start with the same text (and ask the same tools).
    const asked = "Please refund order A-1002.";
    await h.drain([clientMessage(newConversationId(), asked)]);
    await h.drain([clientMessage(newConversationId(), asked, { customer: "cust_bob" })]);
    const before = await bobsTexts();
    expect(before.length).toBeGreaterThan(1);
    expect((await erase()).outcome).toBe("erased");
    expect(await bobsTexts()).toEqual(before);
  });
});
