import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VersionConflictError } from "../../functions/core/errors";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  customerMessage,
  loadConversation,
  streamOf,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import { withObservedDuplicates } from "../../lib/dev/local/trace";
import { renderTraceText } from "../../lib/operator/render-text";
import { traceOf } from "../../lib/operator/source";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";

/**
 * Issue 9, item 4: after the first cancelled TransactWriteItems on the events table (a version
 * conflict or a duplicate is enough), the local relay heard no stream record again and the whole
 * stack went silent. A customer sends two messages in one PutEvents call; while the stack works
 * on them, a commit on that conversation's stream loses its race (as a stale worker's would);
 * everything sent before and after must still be relayed and answered.
 */
const TIMEOUT = 90_000;

describe("the local stack after a cancelled transaction on the events table", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `tx${ulid().slice(-6).toLowerCase()}`,
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  const sent: Envelope[] = [];
  const delivered = (conversationId: string, taskId: string) =>
    waitUntil(
      `the delivery of ${taskId}`,
      async () => {
        const view = await loadConversation(env, conversationId);
        return view?.turns[taskId]?.status === "delivered" ? view : undefined;
      },
      TIMEOUT,
    ).catch(async (error) => {
      // What a timeout needs to be understood: the view, and the trace of every message sent.
      const view = await loadConversation(env, conversationId);
      const lines = [`view of ${conversationId}: ${JSON.stringify(view, null, 1)}`];
      for (const message of sent) {
        const trace = await traceOf(env.ops, message.correlation_id);
        lines.push(
          `trace of ${message.task_id}:`,
          trace ? renderTraceText(withObservedDuplicates(trace, env.observations)) : "  none",
        );
      }
      lines.push(
        `runtime failures: ${JSON.stringify(env.observations.failures, null, 1)}`,
        `consumer errors: ${JSON.stringify(env.observations.errors, null, 1)}`,
      );
      console.error(lines.join("\n"));
      throw error;
    });
  const deliveriesTo = (conversationId: string) =>
    env.channel.deliveries().filter((d) => d.conversationId === conversationId);

  it(
    "two messages of one conversation in one call, a lost commit race, another conversation: all answered",
    async () => {
      const started = Date.now();
      const alice = `conv_${ulid()}`;
      const first = customerMessage(
        alice,
        "cust_alice",
        "Has the refund for order 123 gone through?",
      );
      const second = customerMessage(
        alice,
        "cust_alice",
        "Sorry, I meant order A-1001: where is it?",
      );
      sent.push(first, second);
      await putOnBus(env, "events", [first, second]);

      // A commit that appends at a version already taken: cancelled as a version conflict, as a
      // stale worker's commit would be (its inbox row and event are written together or not).
      const [accepted] = await waitUntil("the first accepted message", async () => {
        const events = await streamOf(env, { type: "conversation", id: alice });
        return events.length > 0 ? events : undefined;
      });
      if (!accepted) throw new Error("no accepted message");
      const now = new Date();
      await expect(
        env.store.commit({
          inbox: {
            group: "stale-worker",
            eventId: second.event_id,
            eventType: second.event_type,
            outcome: "applied",
            aggregate: { type: "conversation", id: alice },
            version: accepted.aggregate.version,
            correlationId: second.correlation_id,
            taskId: second.task_id,
            producer: second.producer,
            occurredAt: second.occurred_at,
            recordedAt: now.toISOString(),
            expiresAt: Math.floor(now.getTime() / 1000) + 3600,
          },
          append: [accepted],
        }),
      ).rejects.toBeInstanceOf(VersionConflictError);
      expect(await env.store.inboxRecords("stale-worker", [second.event_id])).toEqual([]);

      // The entries of one PutEvents call come in no set order (the group's buffer is a standard
      // queue): the newer message is the one the conversation accepted last.
      const newerTask = await waitUntil("both messages accepted", async () => {
        const events = await streamOf(env, { type: "conversation", id: alice });
        const tasks = events
          .filter((e) => e.event_type === "conversation.message.accepted")
          .map((e) => e.task_id);
        return tasks.length === 2 ? tasks[1] : undefined;
      });
      const [older, newer] = newerTask === second.task_id ? [first, second] : [second, first];
      await delivered(alice, newer.task_id);
      const bob = `conv_${ulid()}`;
      const third = customerMessage(bob, "cust_bob", "Was order 456 delivered?");
      sent.push(third);
      await putOnBus(env, "events", [third]);
      await delivered(bob, third.task_id);
      await env.runtime.idle({ timeoutMs: TIMEOUT });

      // Alice's newer message is answered (the older one too, once at most, or superseded).
      const toAlice = deliveriesTo(alice);
      expect(toAlice.map((d) => d.key)).toContain(`${newer.task_id}:reply:1`);
      expect(toAlice.every((d) => d.recipient === "cust_alice")).toBe(true);
      expect(toAlice.find((d) => d.key === `${newer.task_id}:reply:1`)?.text).toContain(
        newer === second ? "A-1001" : "123",
      );
      expect(toAlice.filter((d) => d.key.startsWith(older.task_id)).length).toBeLessThanOrEqual(1);
      expect(deliveriesTo(bob)).toMatchObject([
        { key: `${third.task_id}:reply:1`, recipient: "cust_bob" },
      ]);
      expect(deliveriesTo(bob)[0]?.text).toContain("456");
      expect(env.observations.failures).toEqual([]);
      console.info(`both conversations answered in ${Date.now() - started} ms`);
    },
    TIMEOUT * 3,
  );
});
