import { type Envelope, type EventRegistry, envelopeBytes, type Topic } from "../../schemas";
import { backoff, chunk, sleep } from "./batching";
import { claimOf } from "./claim-check";
import {
  type DirectDeliveryOptions,
  type DirectDeliveryReport,
  deliverDirectly,
  type PlacedEvent,
} from "./direct-delivery";
import { AgentBusError, describe, PermanentError, TransientError } from "./errors";
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
  /**
   * The topic stored with each event at commit, by event id (the events table's `topic`): the
   * relay publishes there without knowing the event's type. An event without one (stored before
   * topics were) goes to the topic the registry gives its type.
   */
  readonly topics?: ReadonlyMap<string, Topic>;
  /**
   * The topic of each event type the stack's applications define, which the hub's registry does
   * not hold (`EVENT_TOPICS`, written by the stack): where an event of one stored without a topic
   * goes.
   */
  readonly typeTopics?: ReadonlyMap<string, Topic>;
  /**
   * Event types not published (`UNPUBLISHED_TYPES`, written by the stack): stored types that no
   * rule of the stack takes and that the stack's `publish` does not name. Their events stay in
   * the event store and its stream; every other type is published, a type the stack did not know
   * of included.
   */
  readonly unpublished?: ReadonlySet<string>;
  /**
   * The groups delivered by the relay (`delivery: "relay"`, `DIRECT_GROUPS`): each event is sent
   * to the FIFO queue of every one whose rule takes it, before anything is published.
   */
  readonly direct?: DirectDeliveryOptions;
}

/**
 * The relay's environment variable with the topics of the stack's application event types: JSON,
 * topic -> type names (eventTopicsOf).
 */
export const EVENT_TOPICS_ENV = "EVENT_TOPICS";

/**
 * The relay's environment variable with the event types it does not publish: JSON, an array of
 * type names (lib/infra/published-types.ts).
 */
export const UNPUBLISHED_TYPES_ENV = "UNPUBLISHED_TYPES";

/** `EVENT_TOPICS`'s value read as a map of event type to topic. */
export function typeTopicsOf(
  byTopic: Partial<Record<Topic, readonly string[]>> | undefined,
): Map<string, Topic> {
  const types = new Map<string, Topic>();
  for (const [topic, names] of Object.entries(byTopic ?? {}) as [Topic, string[]][])
    for (const name of names) types.set(name, topic);
  return types;
}

export interface RelayReport {
  readonly published: number;
  /** Events of an unpublished type (`options.unpublished`), left in the event store only. */
  readonly skipped: number;
  readonly calls: number;
  readonly retriedEntries: number;
  /** What went straight to the FIFO queues of the groups the relay delivers (`options.direct`). */
  readonly direct?: DirectDeliveryReport;
}

/**
 * Publish events read from the event store's stream to the bus of each event's topic: the one
 * stored with it (`options.topics`), else the one its type's definition names (the registry's, or
 * the stack's application types': `options.typeTopics`). An event of a type the stack does not
 * publish (`options.unpublished`: no rule of the stack takes it) is skipped. An event none of
 * them places is not published: the others are, and then relay.unknown_type (permanent) names it
 * in its `unpublished`, for the relay's failure record (functions/handlers/relay.ts).
 * Entries go out in stream order, in calls of at most 10 entries / 256 KB; only the entries that
 * failed are retried (with jittered backoff), before the next call, so the relay keeps each
 * aggregate's order. Events of one transaction may arrive in separate
 * stream batches: nothing here assumes they come together. Publishing is at least once: a retry
 * after a lost response publishes again, and consumers de-duplicate by event id and version.
 * Throws TransientError when entries still fail after `maxAttempts`, so the stream retries.
 * Before anything is published, each event goes to the FIFO queue of every group the relay
 * delivers whose rule takes it (`options.direct`, ./direct-delivery.ts), whether its type is
 * published or not.
 */
export async function relay(
  events: readonly Envelope[],
  registry: EventRegistry,
  publisher: EventPublisher,
  options: RelayOptions = {},
): Promise<RelayReport> {
  const placed: PlacedEvent[] = [];
  const unplaced: Envelope[] = [];
  for (const event of events) {
    const topic =
      options.topics?.get(event.event_id) ??
      registry.get(event.event_type, event.schema_version)?.topic ??
      options.typeTopics?.get(event.event_type);
    // An event too large for the bus or a queue travels as its claim (./claim-check.ts).
    if (topic) placed.push({ topic, envelope: claimOf(event) });
    else unplaced.push(event);
  }
  const direct = options.direct ? await deliverDirectly(placed, options.direct) : undefined;
  // Left out of the buses: neither published nor named in a failure record.
  const publishing = events.filter((e) => !options.unpublished?.has(e.event_type));
  const byTopic = new Map<Topic, Envelope[]>();
  for (const { topic, envelope } of placed)
    if (!options.unpublished?.has(envelope.event_type))
      byTopic.set(topic, [...(byTopic.get(topic) ?? []), envelope]);
  const progress: Progress = {
    events: publishing,
    calls: 0,
    retriedEntries: 0,
    published: new Set(),
  };
  for (const [topic, pending] of byTopic) {
    // Calls go out one after the other and a call's failed entries are retried before the next
    // call is made, so a later version of an aggregate never overtakes an earlier one here.
    for (const entries of chunk(
      pending,
      (e) => envelopeBytes(e) + ENTRY_OVERHEAD_BYTES,
      PUT_EVENTS_MAX_ENTRIES,
      PUT_EVENTS_MAX_BYTES,
    ))
      await publishCall(topic, entries, publisher, progress, options);
  }
  const unplacedPublishing = unplaced.filter((e) => !options.unpublished?.has(e.event_type));
  if (unplacedPublishing.length > 0) throw unknownTypes(unplacedPublishing);
  return {
    published: publishing.length,
    skipped: events.length - publishing.length,
    calls: progress.calls,
    retriedEntries: progress.retriedEntries,
    ...(direct ? { direct } : {}),
  };
}

/** What one relay run has done so far. */
interface Progress {
  /** Every event of the run it publishes, in stream order. */
  readonly events: readonly Envelope[];
  calls: number;
  retriedEntries: number;
  /** Ids of the events published so far. */
  readonly published: Set<string>;
}

/** One call's entries, published with their failures retried until none is left or attempts run out. */
async function publishCall(
  topic: Topic,
  entries: readonly Envelope[],
  publisher: EventPublisher,
  progress: Progress,
  options: RelayOptions,
): Promise<void> {
  const maxAttempts = options.maxAttempts ?? 4;
  const wait = options.wait ?? sleep;
  let remaining = entries;
  let lastFailures: PublishFailure[] = [];
  for (let attempt = 0; remaining.length > 0; attempt++) {
    // Stop here: publishing later entries now could put an aggregate's events out of order.
    if (attempt >= maxAttempts) throw publishFailed(remaining, lastFailures, progress, maxAttempts);
    if (attempt > 0) {
      progress.retriedEntries += remaining.length;
      await wait(backoff(attempt));
    }
    progress.calls++;
    try {
      lastFailures = await publisher.publish(topic, remaining);
    } catch (error) {
      if (error instanceof AgentBusError && error.errorClass === "permanent") throw error;
      const { code, message } = describe(error);
      lastFailures = remaining.map((e) => ({ eventId: e.event_id, code, message }));
    }
    const failedIds = new Set(lastFailures.map((f) => f.eventId));
    for (const e of remaining) if (!failedIds.has(e.event_id)) progress.published.add(e.event_id);
    remaining = remaining.filter((e) => failedIds.has(e.event_id));
  }
}

function publishFailed(
  remaining: readonly Envelope[],
  lastFailures: readonly PublishFailure[],
  { events, published }: Progress,
  maxAttempts: number,
): TransientError {
  return new TransientError(
    "relay.publish_failed",
    `${remaining.length} of ${events.length} events could not be published after ${maxAttempts} attempts`,
    {
      details: {
        eventIds: remaining.map((e) => e.event_id),
        lastFailures: lastFailures.slice(-10),
        // Every event of the batch not published: what the relay's failure record names.
        unpublished: events.filter((e) => !published.has(e.event_id)).map((e) => e.event_id),
      },
    },
  );
}

/**
 * Events stored without a topic, of types the relay cannot place: a producer newer than this
 * relay, or an application type of a stack deployed before its types were given to the relay.
 */
function unknownTypes(unplaced: readonly Envelope[]): PermanentError {
  const types = [...new Set(unplaced.map((e) => `${e.event_type}@${e.schema_version}`))];
  return new PermanentError(
    "relay.unknown_type",
    `${unplaced.length} event(s) stored without a topic, of a type this relay does not know (${types.join(", ")}), were not published: they are recorded in the relay's failure queue (its alarm fires), and \`agentbus republish --failures --app <application>\` puts them on their buses`,
    { details: { types, unpublished: unplaced.map((e) => e.event_id) } },
  );
}
