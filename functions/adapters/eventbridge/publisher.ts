import type { PutEventsResultEntry } from "@aws-sdk/client-eventbridge";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import type { Envelope, Topic } from "../../../schemas";
import { AgentBusError, PermanentError, TransientError } from "../../core/errors";
import type { EventPublisher, PublishFailure } from "../../core/ports";
import type { AwsClient } from "../aws/client";
import { PutEvents } from "../aws/operations";
import { snakeCase } from "../sdk-errors";

/** The `source` of every event AgentBus puts on its buses (rules match on its prefix). */
export const EVENT_SOURCE = "agentbus";
/**
 * The relay's `source` on the classic buses. The rule that forwards a topic's classic events to its
 * new bus (Topic.subscriberBus) leaves these out: the relay publishes them to the new bus itself,
 * with their event group, so forwarded they would be ingested and billed a second time.
 */
export const RELAY_EVENT_SOURCE = "agentbus.relay";
/** PutEvents takes at most 10 entries. */
export const MAX_PUT_EVENTS_ENTRIES = 10;

export interface EventBridgePublisherOptions {
  /** Created once per container by the caller. */
  readonly client: AwsClient;
  /** Bus name (or ARN) of each topic. A topic without a bus cannot be published. */
  readonly buses: Partial<Record<Topic, string>>;
  /** The entries' `source`: EVENT_SOURCE unless given. */
  readonly source?: string;
}

/**
 * Publishes envelopes of one topic with one PutEvents call: detail = the envelope, detail-type =
 * its event type, time = its occurred_at. Per-entry failures come back by index and are returned
 * (the relay retries only those); a throttled or failed call throws TransientError; a
 * configuration or request error throws PermanentError.
 */
export class EventBridgePublisher implements EventPublisher {
  private readonly client: AwsClient;
  private readonly buses: Partial<Record<Topic, string>>;
  private readonly source: string;

  constructor(options: EventBridgePublisherOptions) {
    this.client = options.client;
    this.buses = options.buses;
    this.source = options.source ?? EVENT_SOURCE;
  }

  async publish(topic: Topic, envelopes: readonly Envelope[]): Promise<PublishFailure[]> {
    if (envelopes.length === 0) return [];
    const bus = this.buses[topic];
    if (!bus) {
      throw new PermanentError(
        "eventbridge.no_bus",
        `no event bus is configured for topic ${topic}`,
      );
    }
    if (envelopes.length > MAX_PUT_EVENTS_ENTRIES) {
      throw new PermanentError(
        "eventbridge.too_many_entries",
        `PutEvents takes at most ${MAX_PUT_EVENTS_ENTRIES} entries, got ${envelopes.length}`,
      );
    }
    let entries: PutEventsResultEntry[];
    let failedCount: number;
    try {
      const output = await this.client.send(
        PutEvents({
          Entries: envelopes.map((envelope) => ({
            EventBusName: bus,
            Source: this.source,
            DetailType: envelope.event_type,
            Detail: JSON.stringify(envelope),
            Time: new Date(envelope.occurred_at),
          })),
        }),
      );
      entries = output.Entries ?? [];
      failedCount = output.FailedEntryCount ?? 0;
    } catch (error) {
      throw eventBridgeFailure(error, "eventbridge");
    }
    if (failedCount === 0) return [];
    if (entries.length !== envelopes.length) {
      // Results are matched to requests by index; without one result per entry, nothing is known.
      return envelopes.map((envelope) => ({
        eventId: envelope.event_id,
        code: "eventbridge.unmatched_results",
        message: `PutEvents reported ${failedCount} failures but ${entries.length} results for ${envelopes.length} entries`,
      }));
    }
    const failures: PublishFailure[] = [];
    for (const [index, entry] of entries.entries()) {
      const envelope = envelopes[index];
      if (envelope && entry.ErrorCode) {
        failures.push({
          eventId: envelope.event_id,
          code: entry.ErrorCode,
          message: entry.ErrorMessage ?? "",
        });
      }
    }
    return failures;
  }
}

/** A failed PutEvents call as an AgentBus error: throttled or unavailable is transient. */
export function eventBridgeFailure(
  error: unknown,
  service: "eventbridge" | "eventbridgev2",
): AgentBusError {
  if (error instanceof AgentBusError) return error;
  const e = error as Parameters<typeof isThrottlingError>[0] & { $fault?: string };
  const name = error instanceof Error ? error.name : "Error";
  const message = `PutEvents failed: ${error instanceof Error ? error.message : String(error)}`;
  if (isThrottlingError(e))
    return new TransientError(`${service}.throttled`, message, { cause: error });
  if (isTransientError(e) || isServerError(e) || e.$fault !== "client")
    return new TransientError(`${service}.unavailable`, message, { cause: error });
  // A missing bus, a denied call or an invalid request: retrying the same call cannot help.
  return new PermanentError(`${service}.${snakeCase(name)}`, message, { cause: error });
}
