import fc from "fast-check";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
// The customer-support application's event types, which its role modules would define.
import "../../functions/roles/customer-support/events/index";
import { AgentBusError, classify, TransientError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps, EventStore } from "../../functions/core/ports";
import { InMemorySideEffects, SideEffectTransitionError } from "../../functions/core/side-effects";
import type {
  Delivered,
  DeliveryFailed,
} from "../../functions/roles/customer-support/events/conversation";
import {
  LocalChannel,
  type LocalChannelFault,
} from "../../functions/roles/customer-support/integrations/reply-channel/memory";
import type { ChannelPort } from "../../functions/roles/customer-support/integrations/reply-channel/port";
import {
  DELIVERED,
  DELIVERY_FAILED,
  NOT_SENT,
  OUTCOME_UNKNOWN,
  replyKey,
  senderRole,
} from "../../functions/roles/customer-support/sender/sender";
import { type Envelope, registry } from "../../schemas";
import { makeDeps, newCorrelationId, newTaskId } from "./fixtures";

const START = "2026-09-01T10:00:00.000Z";

interface SendOptions {
  readonly taskId?: string;
  readonly conversationId?: string;
  readonly version?: number;
  readonly logicalAttempt?: number;
  readonly inputVersion?: number;
  readonly expiresAt?: string;
  readonly customerId?: string;
}

function sendRequested(options: SendOptions = {}): Envelope {
  const taskId = options.taskId ?? newTaskId();
  const conversationId = options.conversationId ?? `conv_${ulid()}`;
  const parsed = registry.parse({
    event_id: ulid(),
    event_type: "notification.send.requested",
    schema_version: 1,
    occurred_at: START,
    correlation_id: newCorrelationId(),
    causation_id: null,
    task_id: taskId,
    conversation_id: conversationId,
    aggregate: { type: "reply", id: taskId, version: options.version ?? 1 },
    order_key: conversationId,
    producer: "reply-generator",
    input_version: options.inputVersion ?? 1,
    ...(options.expiresAt ? { expires_at: options.expiresAt } : {}),
    payload: {
      conversation_id: conversationId,
      customer_id: options.customerId ?? "cust_alice",
      channel: "chat",
      text: "Your order has shipped.",
      logical_attempt: options.logicalAttempt ?? 1,
    },
  });
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.envelope;
}

/** A conversation at `version`, whose newest turn is NEWEST_TASK. */
const conversationAt = (version: number) => ({
  version,
  newestTask: NEWEST_TASK,
  context: () => [],
});
const NEWEST_TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";

function setup(
  options: {
    versions?: Map<string, number>;
    maxUnknownAttempts?: number;
    channel?: ChannelPort;
  } = {},
) {
  const { deps, store, clock } = makeDeps(START);
  const channel = new LocalChannel({ clock });
  const sideEffects = new InMemorySideEffects();
  const versions = options.versions ?? new Map<string, number>();
  const role = senderRole({
    channel: options.channel ?? channel,
    sideEffects,
    conversation: async (id) => conversationAt(versions.get(id) ?? 1),
    maxUnknownAttempts: options.maxUnknownAttempts,
  });
  const facts = (type: string) => store.log.filter((e) => e.event_type === type);
  return { deps, store, clock, channel, sideEffects, versions, role, facts };
}

async function failureOf(promise: Promise<unknown>): Promise<AgentBusError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof AgentBusError) return error;
    throw error;
  }
  throw new Error("expected the call to fail");
}

describe("sender", () => {
  it("delivers a send command delivered three times once, under one key", async () => {
    const t = setup();
    const event = sendRequested();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await consume(event, t.role, t.deps)).status);
    expect(statuses).toEqual(["applied", "duplicate", "duplicate"]);
    expect(t.channel.deliveries()).toHaveLength(1);
    expect(t.channel.sends()).toBe(1);
    expect(t.channel.deduplicated()).toBe(0);
    expect([...t.sideEffects.records.keys()]).toEqual([`${event.task_id}:reply:1`]);
    const delivered = t.facts(DELIVERED);
    expect(delivered).toHaveLength(1);
    const fact = delivered[0] as Envelope<Delivered>;
    expect(fact.payload).toMatchObject({
      idempotency_key: `${event.task_id}:reply:1`,
      confirmed_by: "send",
      delivery_id: t.channel.deliveries()[0]?.deliveryId,
      channel: "chat",
    });
    expect(fact.input_version).toBe(1);
    expect(fact.order_key).toBe(event.conversation_id);
    expect(fact.aggregate).toMatchObject({ type: "delivery", id: event.task_id, version: 1 });
    expect(t.sideEffects.records.get(replyKey(event))?.state).toBe("succeeded");
  });

  it("resolves a timeout after the channel applied the send by querying the same key", async () => {
    const t = setup();
    const event = sendRequested();
    t.channel.inject({ kind: "timeout-after-apply" });
    const result = await consume(event, t.role, t.deps);
    expect(result.status).toBe("applied");
    expect(t.channel.deliveries()).toHaveLength(1);
    expect(t.channel.sends()).toBe(1);
    expect(t.channel.queries()).toBe(1);
    const fact = t.facts(DELIVERED)[0] as Envelope<Delivered>;
    expect(fact.payload.confirmed_by).toBe("query");
    expect(fact.payload.idempotency_key).toBe(replyKey(event));
    expect([...t.sideEffects.records.keys()]).toEqual([replyKey(event)]);
    expect(t.sideEffects.records.get(replyKey(event))).toMatchObject({
      state: "succeeded",
      attempts: 1,
    });
  });

  it("resends with the same key when the query after a timeout finds nothing", async () => {
    const t = setup();
    const event = sendRequested();
    t.channel.inject({ kind: "timeout-before-apply" });
    await consume(event, t.role, t.deps);
    expect(t.channel.sends()).toBe(2);
    expect(t.channel.deliveries()).toHaveLength(1);
    expect(t.channel.deliveries()[0]?.key).toBe(replyKey(event));
    expect((t.facts(DELIVERED)[0] as Envelope<Delivered>).payload.confirmed_by).toBe("send");
    expect([...t.sideEffects.records.keys()]).toEqual([replyKey(event)]);
  });

  it("throws a transient error while the outcome is unknown, and a later delivery resolves it", async () => {
    const t = setup();
    const event = sendRequested();
    t.channel.inject({ kind: "timeout-after-apply" });
    t.channel.inject({ kind: "query-unknown" });
    const error = await failureOf(consume(event, t.role, t.deps, { receiveCount: 1 }));
    expect(error).toBeInstanceOf(TransientError);
    expect(error.code).toBe(OUTCOME_UNKNOWN);
    expect(classify(error)).toBe("transient");
    expect(t.sideEffects.records.get(replyKey(event))?.state).toBe("unknown");
    expect(t.facts(DELIVERED)).toHaveLength(0);
    expect(t.store.log).toHaveLength(0);

    t.clock.advance(30_000);
    const result = await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(result.status).toBe("applied");
    expect(t.channel.sends()).toBe(1);
    expect(t.channel.deliveries()).toHaveLength(1);
    expect((t.facts(DELIVERED)[0] as Envelope<Delivered>).payload.confirmed_by).toBe("query");
    expect(t.sideEffects.records.get(replyKey(event))).toMatchObject({
      state: "succeeded",
      attempts: 2,
    });
  });

  it("queries first on a redelivery after the channel was unavailable, then sends once", async () => {
    const t = setup();
    const event = sendRequested();
    t.channel.inject({ kind: "unavailable" });
    const error = await failureOf(consume(event, t.role, t.deps));
    expect(error.code).toBe("channel.unavailable");
    expect(t.sideEffects.records.get(replyKey(event))?.state).toBe("pending");
    await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(t.channel.queries()).toBe(1);
    expect(t.channel.sends()).toBe(2);
    expect(t.channel.deliveries()).toHaveLength(1);
  });

  it("escalates with outcome unknown once the bound is reached, without delivering", async () => {
    const t = setup({ maxUnknownAttempts: 3 });
    const event = sendRequested();
    t.channel.inject({ kind: "timeout-before-apply" });
    t.channel.inject({ kind: "query-unknown" });
    for (let receive = 1; receive <= 2; receive++) {
      if (receive > 1) t.channel.inject({ kind: "query-unknown" });
      const error = await failureOf(consume(event, t.role, t.deps, { receiveCount: receive }));
      expect(error.code).toBe(OUTCOME_UNKNOWN);
    }
    t.channel.inject({ kind: "query-unknown" });
    const result = await consume(event, t.role, t.deps, { receiveCount: 3 });
    expect(result.status).toBe("applied");
    expect(t.channel.deliveries()).toHaveLength(0);
    expect(t.facts(DELIVERED)).toHaveLength(0);
    const failed = t.facts(DELIVERY_FAILED);
    expect(failed).toHaveLength(1);
    expect((failed[0] as Envelope<DeliveryFailed>).payload).toMatchObject({
      outcome: "unknown",
      code: OUTCOME_UNKNOWN,
      idempotency_key: replyKey(event),
    });
    expect(t.sideEffects.records.get(replyKey(event))).toMatchObject({
      state: "unknown",
      attempts: 3,
    });
    // The same command re-issued (a new event, same logical attempt) finds the escalation.
    const again = sendRequested({
      taskId: event.task_id,
      conversationId: event.conversation_id,
      version: 2,
    });
    await consume(again, t.role, t.deps);
    expect(t.channel.sends()).toBe(1);
    expect(t.facts(DELIVERY_FAILED)).toHaveLength(1);
  });

  it("escalates on the queue's receive count even when fewer claims were recorded", async () => {
    const t = setup({ maxUnknownAttempts: 4 });
    const event = sendRequested();
    t.channel.inject({ kind: "timeout-before-apply" });
    t.channel.inject({ kind: "query-unknown" });
    await consume(event, t.role, t.deps, { receiveCount: 4 });
    expect((t.facts(DELIVERY_FAILED)[0] as Envelope<DeliveryFailed>).payload.outcome).toBe(
      "unknown",
    );
  });

  it("records a refusal as failed and emits notification.failed once", async () => {
    const t = setup();
    const event = sendRequested();
    t.channel.inject({ kind: "reject", code: "invalid_recipient" });
    const result = await consume(event, t.role, t.deps);
    expect(result.status).toBe("applied");
    expect(t.channel.deliveries()).toHaveLength(0);
    const failed = t.facts(DELIVERY_FAILED);
    expect(failed).toHaveLength(1);
    expect((failed[0] as Envelope<DeliveryFailed>).payload).toMatchObject({
      outcome: "failed",
      code: "channel.rejected",
    });
    expect((failed[0] as Envelope<DeliveryFailed>).payload.message).toContain("invalid_recipient");
    expect(t.sideEffects.records.get(replyKey(event))?.state).toBe("failed");
    expect((await consume(event, t.role, t.deps)).status).toBe("duplicate");
    expect(t.channel.sends()).toBe(1);
  });

  it("discards a reply superseded by a newer conversation version, without a channel call", async () => {
    const t = setup();
    const event = sendRequested({ inputVersion: 1 });
    t.versions.set(event.conversation_id as string, 2);
    const result = await consume(event, t.role, t.deps);
    expect(result).toMatchObject({ status: "discarded", reason: "superseded" });
    expect(t.channel.sends()).toBe(0);
    expect(t.channel.queries()).toBe(0);
    expect(t.sideEffects.records.size).toBe(0);
    // The turn says it will get no reply, and which turn answers.
    expect(t.facts("support.superseded")).toEqual([
      expect.objectContaining({
        task_id: event.task_id,
        input_version: 1,
        payload: { conversation_id: event.conversation_id, superseded_by: NEWEST_TASK },
      }),
    ]);
  });

  it("closes a claimed send the channel never saw once it is superseded, and says so", async () => {
    const t = setup();
    const event = sendRequested({ inputVersion: 1 });
    t.channel.inject({ kind: "unavailable" });
    await failureOf(consume(event, t.role, t.deps));
    t.versions.set(event.conversation_id as string, 2); // a newer message meanwhile
    const result = await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(result).toMatchObject({ status: "discarded", reason: "superseded" });
    expect(t.channel.deliveries()).toHaveLength(0);
    expect(t.sideEffects.records.get(replyKey(event))).toMatchObject({
      state: "failed",
      error: { code: NOT_SENT },
    });
    expect(t.facts("support.superseded").map((e) => e.payload)).toEqual([
      { conversation_id: event.conversation_id, superseded_by: NEWEST_TASK },
    ]);
  });

  it("sends a reply whose input version is the current one", async () => {
    const t = setup();
    const event = sendRequested({ inputVersion: 2 });
    t.versions.set(event.conversation_id as string, 2);
    expect((await consume(event, t.role, t.deps)).status).toBe("applied");
    expect(t.channel.deliveries()).toHaveLength(1);
  });

  it("discards an expired send command, without a channel call", async () => {
    const t = setup();
    const event = sendRequested({ expiresAt: "2026-09-01T10:00:30.000Z" });
    t.clock.advance(31_000);
    const result = await consume(event, t.role, t.deps);
    expect(result).toMatchObject({ status: "discarded", reason: "expired" });
    expect(t.channel.sends()).toBe(0);
    expect(t.sideEffects.records.size).toBe(0);
  });

  it("resolves a send that timed out after applying and comes back past its deadline", async () => {
    const t = setup();
    const event = sendRequested({ expiresAt: "2026-09-01T10:00:30.000Z" });
    t.channel.inject({ kind: "timeout-after-apply" });
    t.channel.inject({ kind: "query-unknown" });
    const error = await failureOf(consume(event, t.role, t.deps, { receiveCount: 1 }));
    expect(error.code).toBe(OUTCOME_UNKNOWN);
    expect(t.channel.deliveries()).toHaveLength(1);

    t.clock.advance(60_000); // redelivered after the deadline
    const result = await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(result.status).toBe("applied");
    expect(t.channel.sends()).toBe(1);
    const delivered = t.facts(DELIVERED);
    expect(delivered).toHaveLength(1);
    expect((delivered[0] as Envelope<Delivered>).payload.confirmed_by).toBe("query");
    expect(t.sideEffects.records.get(replyKey(event))).toMatchObject({ state: "succeeded" });
  });

  it("emits the recorded outcome of a superseded send whose commit was lost", async () => {
    const t = setup();
    const event = sendRequested({ inputVersion: 1 });
    const lost: ConsumerDeps = {
      ...t.deps,
      store: {
        load: (r) => t.store.load(r),
        readStream: (s, f, to) => t.store.readStream(s, f, to),
        commit: async () => {
          throw new TransientError("dynamodb.unavailable", "lost");
        },
      },
    };
    await failureOf(consume(event, t.role, lost));
    expect(t.channel.deliveries()).toHaveLength(1);
    t.versions.set(event.conversation_id as string, 2); // a newer message meanwhile
    const result = await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(result.status).toBe("applied");
    expect(t.channel.sends()).toBe(1);
    expect((t.facts(DELIVERED)[0] as Envelope<Delivered>).payload.confirmed_by).toBe("record");
  });

  it("escalates an expired send whose outcome stays unknown, and never sends it again", async () => {
    const t = setup({ maxUnknownAttempts: 2 });
    const event = sendRequested({ expiresAt: "2026-09-01T10:00:30.000Z" });
    t.channel.inject({ kind: "timeout-before-apply" });
    t.channel.inject({ kind: "query-unknown" });
    await failureOf(consume(event, t.role, t.deps, { receiveCount: 1 }));
    t.clock.advance(60_000);
    t.channel.inject({ kind: "query-unknown" });
    const result = await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(result.status).toBe("applied");
    expect(t.channel.sends()).toBe(1);
    expect((t.facts(DELIVERY_FAILED)[0] as Envelope<DeliveryFailed>).payload.outcome).toBe(
      "unknown",
    );
  });

  it("closes an expired claimed send the channel never saw, without sending it", async () => {
    const t = setup();
    const event = sendRequested({ expiresAt: "2026-09-01T10:00:30.000Z" });
    t.channel.inject({ kind: "unavailable" });
    await failureOf(consume(event, t.role, t.deps));
    expect(t.sideEffects.records.get(replyKey(event))?.state).toBe("pending");
    t.clock.advance(60_000);
    const result = await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(result).toMatchObject({ status: "discarded", reason: "expired" });
    expect(t.channel.queries()).toBe(1);
    expect(t.channel.sends()).toBe(1);
    expect(t.channel.deliveries()).toHaveLength(0);
    expect(t.sideEffects.records.get(replyKey(event))).toMatchObject({
      state: "failed",
      error: { code: NOT_SENT },
    });
    expect(t.facts(DELIVERED)).toHaveLength(0);
    expect(t.facts(DELIVERY_FAILED)).toHaveLength(0);
    // Delivered again: the record is closed and the command is a duplicate.
    expect((await consume(event, t.role, t.deps, { receiveCount: 3 })).status).toBe("duplicate");
    expect(t.channel.sends()).toBe(1);
  });

  it("emits the fact from the record when the channel succeeded but the commit was lost", async () => {
    const t = setup();
    const event = sendRequested();
    const failing: EventStore = {
      load: (r) => t.store.load(r),
      readStream: (s, f, to) => t.store.readStream(s, f, to),
      commit: async () => {
        throw new TransientError("dynamodb.unavailable", "lost");
      },
    };
    const lost: ConsumerDeps = { ...t.deps, store: failing };
    await failureOf(consume(event, t.role, lost));
    expect(t.channel.deliveries()).toHaveLength(1);
    expect(t.store.log).toHaveLength(0);
    await consume(event, t.role, t.deps, { receiveCount: 2 });
    expect(t.channel.sends()).toBe(1);
    expect(t.channel.queries()).toBe(0);
    expect((t.facts(DELIVERED)[0] as Envelope<Delivered>).payload.confirmed_by).toBe("record");
  });

  it("keeps separate keys for separate logical attempts of one task", async () => {
    const t = setup();
    const first = sendRequested();
    const second = sendRequested({
      taskId: first.task_id,
      conversationId: first.conversation_id,
      version: 2,
      logicalAttempt: 2,
    });
    await consume(first, t.role, t.deps);
    await consume(second, t.role, t.deps);
    expect(t.channel.deliveries().map((d) => d.key)).toEqual([
      `${first.task_id}:reply:1`,
      `${first.task_id}:reply:2`,
    ]);
    expect(t.facts(DELIVERED)).toHaveLength(2);
  });

  it("resends on an unknown outcome while the channel deduplicates, and not after", async () => {
    class Dedup extends LocalChannel {
      readonly resendSafeWithinSeconds = 240;
      override async query(): Promise<{ status: "unknown" }> {
        return { status: "unknown" };
      }
    }
    const { deps, store, clock } = makeDeps(START);
    const channel = new Dedup({ clock });
    const sideEffects = new InMemorySideEffects();
    const role = senderRole({
      channel,
      sideEffects,
      conversation: async () => conversationAt(1),
      maxUnknownAttempts: 10,
    });
    const early = sendRequested();
    channel.inject({ kind: "timeout-before-apply" });
    await consume(early, role, deps);
    expect(channel.sends()).toBe(2);
    expect(channel.deliveries()).toHaveLength(1);
    expect(store.log.filter((e) => e.event_type === DELIVERED)).toHaveLength(1);

    const late = sendRequested();
    channel.inject({ kind: "unavailable" });
    await failureOf(consume(late, role, deps));
    clock.advance(241_000);
    const error = await failureOf(consume(late, role, deps, { receiveCount: 2 }));
    expect(error.code).toBe(OUTCOME_UNKNOWN);
    expect(channel.sends()).toBe(3);
    expect(sideEffects.records.get(replyKey(late))?.state).toBe("unknown");
  });

  it("refuses transitions out of a final state", async () => {
    const store = new InMemorySideEffects();
    const now = new Date(START);
    await store.claim("task_a:reply:1", { task_id: "task_a", kind: "reply" }, now);
    await store.markSucceeded("task_a:reply:1", { delivery_id: "d1" }, now);
    await expect(
      store.markFailed("task_a:reply:1", { code: "x", message: "y" }, now),
    ).rejects.toBeInstanceOf(SideEffectTransitionError);
    await expect(
      store.markUnknown("task_a:reply:1", { code: "x", message: "y" }, now),
    ).rejects.toBeInstanceOf(SideEffectTransitionError);
    expect(
      (await store.markSucceeded("task_a:reply:1", { delivery_id: "d2" }, now)).result,
    ).toEqual({ delivery_id: "d1" });
    await expect(
      store.markSucceeded("task_b:reply:1", { delivery_id: "d1" }, now),
    ).rejects.toMatchObject({ code: "side_effect.not_found" });
  });

  it("property: never delivers a key twice, at most one delivered fact per key", async () => {
    const fault = fc.oneof(
      fc.constant<LocalChannelFault>({ kind: "timeout-after-apply" }),
      fc.constant<LocalChannelFault>({ kind: "timeout-before-apply" }),
      fc.constant<LocalChannelFault>({ kind: "unavailable" }),
      fc.constant<LocalChannelFault>({ kind: "query-unknown" }),
      fc.constant<LocalChannelFault>({ kind: "reject", code: "blocked" }),
    );
    const step = fc.record({
      task: fc.nat({ max: 2 }),
      faults: fc.array(fault, { maxLength: 3 }),
      loseCommit: fc.boolean(),
      reissue: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        const t = setup({ maxUnknownAttempts: 4 });
        const tasks = [0, 1, 2].map(() => ({ id: newTaskId(), conv: `conv_${ulid()}`, v: 1 }));
        const receives = new Map<string, number>();
        for (const s of steps) {
          const task = tasks[s.task] as (typeof tasks)[number];
          if (s.reissue) task.v += 1;
          // A re-issue is a new event (next version of the reply stream) with the same logical
          // attempt; otherwise the current event is redelivered.
          const event = sendRequested({
            taskId: task.id,
            conversationId: task.conv,
            version: task.v,
          });
          const redelivered = eventFor(task, event);
          for (const f of s.faults) t.channel.inject(f);
          const receive = (receives.get(redelivered.event_id) ?? 0) + 1;
          receives.set(redelivered.event_id, receive);
          const store: EventStore = s.loseCommit
            ? {
                load: (r) => t.store.load(r),
                readStream: (a, f, to) => t.store.readStream(a, f, to),
                commit: async () => {
                  throw new TransientError("dynamodb.unavailable", "lost");
                },
              }
            : t.store;
          try {
            await consume(redelivered, t.role, { ...t.deps, store }, { receiveCount: receive });
          } catch (error) {
            if (classify(error) !== "transient") throw error;
          }
          t.clock.advance(1000);
        }
        const keys = t.channel.deliveries().map((d) => d.key);
        expect(new Set(keys).size).toBe(keys.length);
        // The sender never relies on the channel's own deduplication: no send for a key the
        // channel had already delivered.
        expect(t.channel.deduplicated()).toBe(0);
        const deliveredKeys = t
          .facts(DELIVERED)
          .map((e) => (e as Envelope<Delivered>).payload.idempotency_key);
        expect(new Set(deliveredKeys).size).toBe(deliveredKeys.length);
        const failedKeys = t
          .facts(DELIVERY_FAILED)
          .map((e) => (e as Envelope<DeliveryFailed>).payload.idempotency_key);
        expect(new Set(failedKeys).size).toBe(failedKeys.length);
        for (const key of deliveredKeys) expect(failedKeys).not.toContain(key);
        // Every key is one of the three tasks' first logical attempt: no key was minted.
        for (const key of t.sideEffects.records.keys())
          expect(tasks.map((task) => `${task.id}:reply:1`)).toContain(key);
        // A delivered fact always matches a delivery the channel made.
        for (const key of deliveredKeys) expect(keys).toContain(key);
      }),
      { numRuns: 150 },
    );
  });
});

/** One event per (task, version): redeliveries of a version reuse its event id. */
const events = new Map<string, Envelope>();
function eventFor(task: { id: string; v: number }, fresh: Envelope): Envelope {
  const id = `${task.id}#${task.v}`;
  const known = events.get(id);
  if (known) return structuredClone(known);
  events.set(id, fresh);
  return structuredClone(fresh);
}

describe("LocalChannel", () => {
  const request = (key: string, recipient = "cust_alice") => ({
    key,
    recipient,
    conversationId: "conv_a",
    text: "hi",
  });

  it("delivers a key once and answers a resend with the first delivery id", async () => {
    const seen: string[] = [];
    const channel = new LocalChannel({ onDelivery: (d) => seen.push(d.key) });
    const first = await channel.send(request("task_a:reply:1"));
    const again = await channel.send(request("task_a:reply:1"));
    expect(again).toEqual(first);
    expect(seen).toEqual(["task_a:reply:1"]);
    expect(channel.sends()).toBe(2);
    expect(channel.deduplicated()).toBe(1);
    expect(await channel.query("task_a:reply:1")).toEqual({
      status: "delivered",
      deliveryId: first.deliveryId,
    });
    expect(await channel.query("task_a:reply:2")).toEqual({ status: "not_found" });
  });

  it("applies each fault once, and only to its key or recipient when given", async () => {
    const channel = new LocalChannel();
    channel.inject({ kind: "reject", code: "blocked", key: "task_b:reply:1" });
    channel.inject({ kind: "timeout-before-apply", recipient: "cust_bob" });
    await channel.send(request("task_a:reply:1"));
    await expect(channel.send(request("task_b:reply:1"))).rejects.toBeInstanceOf(AgentBusError);
    await channel.send(request("task_b:reply:1"));
    await expect(channel.send(request("task_c:reply:1", "cust_bob"))).rejects.toMatchObject({
      code: "channel.timeout",
    });
    expect(channel.pendingFaults()).toEqual([]);
    expect(channel.deliveries().map((d) => d.key)).toEqual(["task_a:reply:1", "task_b:reply:1"]);
  });

  it("delays a send and answers unknown to a query when told to", async () => {
    const waited: number[] = [];
    const channel = new LocalChannel({
      sleep: async (ms) => {
        waited.push(ms);
      },
    });
    channel.inject({ kind: "delay", ms: 250 });
    channel.inject({ kind: "query-unknown" });
    await channel.send(request("task_a:reply:1"));
    expect(waited).toEqual([250]);
    expect(await channel.query("task_a:reply:1")).toEqual({ status: "unknown" });
    expect((await channel.query("task_a:reply:1")).status).toBe("delivered");
  });
});
