import type { Envelope, Topic } from "../../schemas";
import { backoff, chunk, sleep } from "./batching";
import { fifoMessageOf, SEND_BATCH_MAX_BYTES, SEND_BATCH_MAX_ENTRIES } from "./dispatch";
import { describe, TransientError } from "./errors";
import { matches } from "./event-pattern";
import type { FifoMessage, FifoSender } from "./ports";

/**
 * `delivery: "relay"` (lib/infra/README.md): the relay sends each stored event straight to the
 * FIFO queue of every group whose rule takes it, instead of a bus, a rule, a buffer queue and a
 * dispatch function per event. It reads the events in stream order and knows each one's order key
 * and event id, and the group's lanes are a function of the envelope, which is all the dispatch
 * function adds; the message is the one the dispatch function sends (`fifoMessageOf`). At least once: what fails is retried here, then the stream
 * retries the batch; the FIFO queue's deduplication and the inbox drop a repeat.
 */

/**
 * The relay's environment variable naming the groups it delivers to directly: JSON, an array of
 * `DirectGroup`s (written by the stack, lib/infra/constructs/relay.ts).
 */
export const DIRECT_GROUPS_ENV = "DIRECT_GROUPS";

/**
 * A group the relay delivers to: its FIFO queue, its tenant lanes if it has them, and the pattern
 * of its rule on each topic.
 */
export interface DirectGroup {
  readonly group: string;
  readonly queue: string;
  /**
   * The group's `tenantConcurrency`: its messages travel in the tenant's lanes
   * (`messageGroupOf`), as its dispatch function sends them. Absent: by order key.
   */
  readonly tenantConcurrency?: number;
  /**
   * Topic -> the EventBridge pattern of the group's rule on that topic's bus, without `source`:
   * the rule leaves out the relay's own source, whose events this path carries.
   */
  readonly rules: Partial<Record<Topic, unknown>>;
}

/** A stored event and the topic the relay places it on. */
export interface PlacedEvent {
  readonly topic: Topic;
  readonly envelope: Envelope;
}

export interface DirectDeliveryOptions {
  readonly groups: readonly DirectGroup[];
  /** The sender of a group's FIFO queue (SendMessageBatch). */
  readonly senderOf: (group: DirectGroup) => FifoSender;
  /** Attempts per message before the batch is failed back to the stream. */
  readonly maxAttempts?: number;
  readonly wait?: (ms: number) => Promise<void>;
}

export interface DirectDeliveryReport {
  /** Messages sent (an event taken by two groups counts twice). */
  readonly delivered: number;
  readonly calls: number;
  readonly retriedEntries: number;
}

/**
 * Whether a group's rule on `topic` takes the event: matched as EventBridge matches the event the
 * relay would have put on the bus (its type as `detail-type`, the envelope as `detail`).
 */
export function takes(group: DirectGroup, { topic, envelope }: PlacedEvent): boolean {
  const pattern = group.rules[topic];
  if (pattern === undefined) return false;
  return matches({ "detail-type": envelope.event_type, detail: envelope }, pattern);
}

/**
 * Send each event to the FIFO queue of every group that takes it, group by group, in stream order:
 * calls of at most 10 messages / 256 KB, only the failed entries retried (jittered backoff) before
 * the group's next call, so an aggregate's events keep their order in each queue. Throws
 * TransientError (relay.delivery_failed) when messages still fail after `maxAttempts`, naming
 * every event of the batch as unpublished: the stream retries the batch, and the relay's failure
 * record lets `agentbus republish` deliver them through the rule.
 */
export async function deliverDirectly(
  events: readonly PlacedEvent[],
  options: DirectDeliveryOptions,
): Promise<DirectDeliveryReport> {
  const tally = { delivered: 0, calls: 0, retriedEntries: 0 };
  for (const group of options.groups) {
    const messages: FifoMessage[] = events
      .filter((event) => takes(group, event))
      .map((event, i) => ({
        id: String(i),
        ...fifoMessageOf(event.envelope, group.tenantConcurrency),
      }));
    const sender = options.senderOf(group);
    for (const batch of chunk(
      messages,
      (m) => Buffer.byteLength(m.body) + 200,
      SEND_BATCH_MAX_ENTRIES,
      SEND_BATCH_MAX_BYTES,
    )) {
      const failures = await sendWithRetries(batch, sender, tally, options);
      if (failures.length > 0) throw deliveryFailed(group, failures, events, options);
    }
    tally.delivered += messages.length;
  }
  return tally;
}

type SendFailures = { id: string; code: string; message: string }[];

/** One call's messages, its failed entries retried; what still failed after the attempts. */
async function sendWithRetries(
  batch: readonly FifoMessage[],
  sender: FifoSender,
  tally: { calls: number; retriedEntries: number },
  options: DirectDeliveryOptions,
): Promise<SendFailures> {
  const maxAttempts = options.maxAttempts ?? 4;
  const wait = options.wait ?? sleep;
  let remaining = batch;
  let failures: SendFailures = [];
  for (let attempt = 0; remaining.length > 0 && attempt < maxAttempts; attempt++) {
    if (attempt > 0) {
      tally.retriedEntries += remaining.length;
      await wait(backoff(attempt));
    }
    tally.calls++;
    try {
      failures = await sender.send(remaining);
    } catch (error) {
      const { code, message } = describe(error);
      failures = remaining.map((m) => ({ id: m.id, code, message }));
    }
    const failed = new Set(failures.map((f) => f.id));
    remaining = remaining.filter((m) => failed.has(m.id));
  }
  return remaining.length > 0 ? failures : [];
}

function deliveryFailed(
  group: DirectGroup,
  failures: SendFailures,
  events: readonly PlacedEvent[],
  options: DirectDeliveryOptions,
): TransientError {
  return new TransientError(
    "relay.delivery_failed",
    `${failures.length} event(s) could not be sent to ${group.group}'s queue after ${options.maxAttempts ?? 4} attempts`,
    {
      details: {
        group: group.group,
        lastFailures: failures.slice(-10),
        // Nothing of the batch is published yet: the failure record names all of it.
        unpublished: events.map((e) => e.envelope.event_id),
      },
    },
  );
}

/**
 * The FIFO message a group whose rule takes the event gets, built as its dispatch function would
 * build it (`fifoMessageOf`: its message group or tenant lane, the event id as deduplication id);
 * undefined when its rule does not take it. What a consumer's heartbeat sends a group straight to
 * its queue, as the relay sends stored events (./heartbeat-routes.ts).
 */
export function directMessageOf(
  group: DirectGroup,
  event: PlacedEvent,
): Omit<FifoMessage, "id"> | undefined {
  if (!takes(group, event)) return undefined;
  return fifoMessageOf(event.envelope, group.tenantConcurrency);
}
