import { type Envelope, type EventRegistry, envelopeBytes, type Topic } from "../../schemas";
import { backoff, chunk, sleep } from "./batching";
import { AgentBusError, TransientError } from "./errors";
import type { EventPublisher, PublishFailure } from "./ports";

/** PutEvents takes at most 10 entries and 256 KB per call. */
export const PUT_EVENTS_MAX_ENTRIES = 10;
export const PUT_EVENTS_MAX_BYTES = 256 * 1024;
/** Bytes EventBridge counts per entry besides the detail (source, detail-type, time, overhead). */
const ENTRY_OVERHEAD_BYTES = 200;

export interface RelayOptions {
  /** Attempts per entry inside one invocation before the batch is failed back to the stream. */
  readonly maxAttempts?: number;
  readonly wait?: (ms: number) => Promise<void>;
}

export interface RelayReport {
  readonly published: number;
  readonly calls: number;
  readonly retriedEntries: number;
}

/**
 * Publish events read from the event store's stream to the bus of each event's topic.
 * Entries go out in stream order, in calls of at most 10 entries / 256 KB; only the entries that
 * failed are retried (with jittered backoff). Events of one transaction may arrive in separate
 * stream batches: nothing here assumes they come together. Publishing is at least once: a retry
 * after a lost response publishes again, and consumers de-duplicate by event id and version.
 * Throws TransientError when entries still fail after `maxAttempts`, so the stream retries.
 */
export async function relay(
  events: readonly Envelope[],
  registry: EventRegistry,
  publisher: EventPublisher,
  options: RelayOptions = {},
): Promise<RelayReport> {
  const maxAttempts = options.maxAttempts ?? 4;
  const wait = options.wait ?? sleep;
  const byTopic = new Map<Topic, Envelope[]>();
  for (const event of events) {
    const topic = topicOf(event, registry);
    byTopic.set(topic, [...(byTopic.get(topic) ?? []), event]);
  }
  let calls = 0;
  let retriedEntries = 0;
  const lastFailures: PublishFailure[] = [];
  const exhausted: Envelope[] = [];
  for (const [topic, pending] of byTopic) {
    let remaining = pending;
    for (let attempt = 0; remaining.length > 0; attempt++) {
      if (attempt >= maxAttempts) {
        exhausted.push(...remaining);
        break;
      }
      if (attempt > 0) {
        retriedEntries += remaining.length;
        await wait(backoff(attempt));
      }
      const failedIds = new Set<string>();
      for (const entries of chunk(
        remaining,
        (e) => envelopeBytes(e) + ENTRY_OVERHEAD_BYTES,
        PUT_EVENTS_MAX_ENTRIES,
        PUT_EVENTS_MAX_BYTES,
      )) {
        calls++;
        try {
          for (const failure of await publisher.publish(topic, entries)) {
            failedIds.add(failure.eventId);
            lastFailures.push(failure);
          }
        } catch (error) {
          if (error instanceof AgentBusError && error.errorClass === "permanent") throw error;
          for (const e of entries) failedIds.add(e.event_id);
        }
      }
      remaining = remaining.filter((e) => failedIds.has(e.event_id));
    }
  }
  if (exhausted.length > 0) {
    throw new TransientError(
      "relay.publish_failed",
      `${exhausted.length} of ${events.length} events could not be published after ${maxAttempts} attempts`,
      {
        details: {
          eventIds: exhausted.map((e) => e.event_id),
          lastFailures: lastFailures.slice(-10),
        },
      },
    );
  }
  return { published: events.length, calls, retriedEntries };
}

export function topicOf(event: Envelope, registry: EventRegistry): Topic {
  const definition = registry.get(event.event_type, event.schema_version);
  if (!definition) {
    throw new TransientError(
      "relay.unknown_type",
      `no topic for ${event.event_type}@${event.schema_version}: is the relay older than the producer?`,
    );
  }
  return definition.topic;
}
