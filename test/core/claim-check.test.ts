import { describe, expect, it } from "vitest";
import { CLAIM_ABOVE_BYTES, claimOf, openClaim } from "../../functions/core/claim-check";
import { PermanentError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { EventPublisher } from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import { relay } from "../../functions/core/relay";
import type { Role } from "../../functions/core/role";
import { defineEventType, streamFact } from "../../functions/kit";
import {
  type Envelope,
  envelopeBytes,
  MAX_ENVELOPE_BYTES,
  MAX_STORED_ENVELOPE_BYTES,
  registry,
} from "../../schemas";
import * as z from "../../schemas/zod";
import { feedback, makeDeps, newCorrelationId, newTaskId } from "./fixtures";

/**
 * The claim check (functions/core/claim-check.ts): an event too large for a bus travels without
 * its payload and is read from its stream by its consumer; one too large for its stream is
 * refused at once, naming its producer.
 */

const bulkRecorded = defineEventType({
  ...streamFact,
  type: "bulk.recorded",
  description: "A large text was recorded (a test type).",
  payload: z.object({ text: z.string() }),
});

const text = (bytes: number) => "claim check ".repeat(Math.ceil(bytes / 12)).slice(0, bytes);

/** Appends one bulk.recorded of `bytes` of text to a new task's stream, as a producer would. */
async function appendBulk(deps: ReturnType<typeof makeDeps>["deps"], bytes: number) {
  const taskId = newTaskId();
  return appendToStream(deps, {
    aggregate: { type: "task", id: taskId },
    producer: "bulk-writer",
    correlationId: newCorrelationId(),
    taskId,
    decide: () => ({
      state: { n: 1 },
      emit: [{ type: bulkRecorded.type, payload: { text: text(bytes) } }],
    }),
  });
}

/** A publisher that keeps what it was given. */
function keepingPublisher(): EventPublisher & { published: Envelope[] } {
  const published: Envelope[] = [];
  return {
    published,
    async publish(_topic, envelopes) {
      published.push(...envelopes);
      return [];
    },
  };
}

/** A role that keeps the length of the text it was delivered. */
const reader: Role<{ length: number }> = {
  group: "bulk-reader",
  subscriptions: [bulkRecorded.type],
  decide: (_state, event) => ({
    state: { length: (event.payload as { text: string }).text.length },
  }),
};

describe("the claim check", () => {
  it("the relay publishes an event over the bus's limit as its claim, and the consumer reads it from its stream", async () => {
    const { deps, store } = makeDeps();
    const [large] = await appendBulk(deps, 300_000);
    const [small] = await appendBulk(deps, 1_000);
    if (!large || !small) throw new Error("nothing was appended");
    expect(envelopeBytes(large)).toBeGreaterThan(MAX_ENVELOPE_BYTES);
    const publisher = keepingPublisher();
    await relay([large, small], registry, publisher);
    const [claim, plain] = publisher.published;
    expect(plain).toEqual(small);
    expect(claim).toMatchObject({ event_id: large.event_id, payload: null });
    expect(claim?.claim_check?.bytes).toBe(Buffer.byteLength(JSON.stringify(large.payload)));
    expect(envelopeBytes(claim)).toBeLessThan(1_000);
    // What travels is a valid envelope (the dispatch parses it with the registry).
    const traveled = JSON.parse(JSON.stringify(claim)) as unknown;
    expect(registry.parse(traveled)).toMatchObject({ ok: true });
    const result = await consume(traveled, reader, deps);
    expect(result.status).toBe("applied");
    const state = store.states.get(`task#${large.aggregate.id}`);
    expect(state?.data).toEqual({ length: 300_000 });
  });

  it("claims only what a stream holds, and only what is too large", async () => {
    const { deps } = makeDeps();
    const [justUnder] = await appendBulk(deps, CLAIM_ABOVE_BYTES - 2_000);
    if (!justUnder) throw new Error("nothing was appended");
    expect(claimOf(justUnder)).toBe(justUnder);
    // A message from outside a stream has nowhere to be read from: it keeps the bus's limit.
    const message = feedback(newTaskId(), 4);
    expect(
      claimOf({ ...message, payload: { comment: text(300_000) } }).claim_check,
    ).toBeUndefined();
  });

  it("a claim that does not match its stream fails permanently", async () => {
    const { deps } = makeDeps();
    const [large] = await appendBulk(deps, 300_000);
    if (!large) throw new Error("nothing was appended");
    const claim = claimOf(large);
    const tampered = { ...claim, claim_check: { ...claim.claim_check, sha256: "0".repeat(64) } };
    await expect(openClaim(tampered, deps.store)).rejects.toMatchObject({
      code: "claim.mismatch",
    });
    const elsewhere = { ...claim, aggregate: { ...claim.aggregate, version: 7 } };
    await expect(consume(elsewhere, reader, deps)).rejects.toBeInstanceOf(PermanentError);
    await expect(openClaim(elsewhere, deps.store)).rejects.toMatchObject({ code: "claim.missing" });
    // A claim envelope must carry no payload.
    expect(registry.parse({ ...claim, payload: { text: "x" } })).toMatchObject({ ok: false });
  });

  it("a payload too large for its stream fails at once, permanently, naming its producer, and nothing is stored", async () => {
    const { deps, store } = makeDeps();
    const error = await appendBulk(deps, MAX_STORED_ENVELOPE_BYTES + 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({
      code: "emit.too_large",
      errorClass: "permanent",
      details: { producer: "bulk-writer", event_type: "bulk.recorded" },
    });
    expect((error as Error).message).toMatch(/^bulk-writer emitted a bulk\.recorded too large/);
    expect(store.states.size).toBe(0);
  });

  it("a consumer whose decision emits a payload too large for its stream fails the delivery permanently, naming itself", async () => {
    const { deps, store } = makeDeps();
    const [small] = await appendBulk(deps, 100);
    if (!small) throw new Error("nothing was appended");
    const copier: Role<unknown> = {
      group: "bulk-copier",
      subscriptions: [bulkRecorded.type],
      emits: [bulkRecorded.type],
      decide: () => ({
        state: { copied: true },
        emit: [{ type: bulkRecorded.type, payload: { text: text(MAX_STORED_ENVELOPE_BYTES) } }],
      }),
    };
    const before = structuredClone(store.states);
    await expect(consume(small, copier, deps)).rejects.toMatchObject({
      code: "emit.too_large",
      errorClass: "permanent",
      details: { producer: "bulk-copier" },
    });
    expect(store.states).toEqual(before);
  });
});
