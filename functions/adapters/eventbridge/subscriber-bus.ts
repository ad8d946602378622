import type { Envelope, Topic } from "../../../schemas";
import { PermanentError } from "../../core/errors";
import type { EventPublisher, PublishFailure } from "../../core/ports";
import { type AwsClient, operation } from "../aws/client";
import { EVENT_SOURCE, eventBridgeFailure, MAX_PUT_EVENTS_ENTRIES } from "./publisher";

/**
 * Publishing to EventBridge's new buses (`AWS::EventsV2::EventBus`, the `eventbridgev2` API,
 * 2025-05-15), read by the FIFO subscribers of groups with `delivery: "subscriber"`. Facts from
 * AWS's reference for this service (aws/agent-toolkit-for-aws, skills/specialized-skills/
 * serverless-skills/amazon-eventbridge-event-bus: SKILL.md chapters 5, 11 and 21, and
 * references/code-samples.md "Publish from an SDK, checking per-entry results"): the bus is named
 * by ARN at the request level; an entry's `SystemMetadata.EventGroupId` orders it within its group
 * and `SystemMetadata.DeduplicationId` de-duplicates it for 5 minutes; results align with entries
 * by index, each a `SuccessCode` (`PUBLISHED` or `DEDUPLICATED`, both successes) or an
 * `ErrorCode`; `FailedEntryCount` may be absent on success; `ThrottlingException` is retryable.
 */

/** One `PutEvents` entry of the new bus (the member names of its API). */
export interface SubscriberBusEntry {
  readonly Source: string;
  readonly DetailType: string;
  readonly Detail: string;
  readonly Time?: Date;
  readonly SystemMetadata: { readonly EventGroupId: string; readonly DeduplicationId: string };
}

export interface SubscriberBusPutEvents {
  readonly EventBusArn: string;
  readonly Entries: readonly SubscriberBusEntry[];
}

export interface SubscriberBusPutEventsResult {
  readonly Entries?: readonly {
    readonly EventId?: string;
    readonly SuccessCode?: string;
    readonly ErrorCode?: string;
    readonly ErrorMessage?: string;
  }[];
  readonly FailedEntryCount?: number;
}

/**
 * The new bus's `PutEvents`: on AWS `AwsSubscriberBusClient`, in the local runtime its emulation
 * (lib/dev/local/runtime/subscriber-buses.ts). A call that fails throws; an error with
 * `name: "ThrottlingException"` or `$fault: "server"` is retried.
 */
export interface SubscriberBusClient {
  putEvents(request: SubscriberBusPutEvents): Promise<SubscriberBusPutEventsResult>;
}

/**
 * `PutEvents` of EventBridge's new buses (`eventbridgev2`, service `eventsv2`), typed with this
 * port's own types: no AWS SDK for JavaScript package has this service's, so it names no SDK
 * classes (../aws/eventbridge-v2 sends it).
 */
export const PutEventsToSubscriberBus = operation<
  SubscriberBusPutEvents,
  SubscriberBusPutEventsResult
>("eventsv2", "PutEvents");

/**
 * The port on AWS: `PutEvents` of the `eventbridgev2` API sent through an AWS client. The AWS SDK
 * for JavaScript has no client for that API: ../aws/eventbridge-v2 speaks its protocol (Smithy RPC
 * v2 CBOR) on an SDK EventBridge client's credentials and retry strategy, which retries throttling
 * and server faults before this throws. Signed for `events`, the IAM action is `events:PutEvents`
 * on the bus ARN.
 */
export class AwsSubscriberBusClient implements SubscriberBusClient {
  constructor(private readonly client: AwsClient) {}

  async putEvents(request: SubscriberBusPutEvents): Promise<SubscriberBusPutEventsResult> {
    const { $metadata: _, ...result } = await this.client.send(PutEventsToSubscriberBus(request));
    return result;
  }
}

/** The entry of one envelope: the classic entry, grouped by its order key, de-duplicated by its id. */
export function subscriberBusEntry(envelope: Envelope): SubscriberBusEntry {
  return {
    Source: EVENT_SOURCE,
    DetailType: envelope.event_type,
    Detail: JSON.stringify(envelope),
    Time: new Date(envelope.occurred_at),
    SystemMetadata: { EventGroupId: envelope.order_key, DeduplicationId: envelope.event_id },
  };
}

/**
 * Publishes the envelopes of one topic to its new bus in one call, in order; returns the entries
 * that failed (the relay retries only those, before its next call, so an order key's events keep
 * their order). A deduplicated entry is a success: it was published before.
 */
export class SubscriberBusPublisher implements EventPublisher {
  constructor(
    private readonly client: SubscriberBusClient,
    /** The ARN of each topic's new bus. */
    private readonly buses: Partial<Record<Topic, string>>,
  ) {}

  async publish(topic: Topic, envelopes: readonly Envelope[]): Promise<PublishFailure[]> {
    if (envelopes.length === 0) return [];
    const bus = this.buses[topic];
    if (!bus)
      throw new PermanentError("eventbridgev2.no_bus", `no new event bus for topic ${topic}`);
    if (envelopes.length > MAX_PUT_EVENTS_ENTRIES)
      throw new PermanentError(
        "eventbridgev2.too_many_entries",
        `PutEvents takes at most ${MAX_PUT_EVENTS_ENTRIES} entries, got ${envelopes.length}`,
      );
    let result: SubscriberBusPutEventsResult;
    try {
      result = await this.client.putEvents({
        EventBusArn: bus,
        Entries: envelopes.map(subscriberBusEntry),
      });
    } catch (error) {
      throw eventBridgeFailure(error, "eventbridgev2");
    }
    const entries = result.Entries ?? [];
    if ((result.FailedEntryCount ?? 0) === 0 && !entries.some((e) => e.ErrorCode)) return [];
    if (entries.length !== envelopes.length)
      return envelopes.map((envelope) => ({
        eventId: envelope.event_id,
        code: "eventbridgev2.unmatched_results",
        message: `PutEvents reported ${result.FailedEntryCount} failures but ${entries.length} results for ${envelopes.length} entries`,
      }));
    return envelopes.flatMap((envelope, index) => {
      const entry = entries[index];
      if (!entry?.ErrorCode) return [];
      return [
        { eventId: envelope.event_id, code: entry.ErrorCode, message: entry.ErrorMessage ?? "" },
      ];
    });
  }
}

/**
 * Publishes to the classic bus of every topic and, for a topic that has one, to its new bus too:
 * an entry failed on either is returned, and the relay publishes it again on both (consumers
 * de-duplicate the classic copy by event id; the new bus by `DeduplicationId`).
 */
export class BothBusesPublisher implements EventPublisher {
  constructor(
    private readonly classic: EventPublisher,
    private readonly subscriberBus: EventPublisher,
    private readonly topicsWithSubscriberBus: ReadonlySet<Topic>,
  ) {}

  async publish(topic: Topic, envelopes: readonly Envelope[]): Promise<PublishFailure[]> {
    const failures = await this.classic.publish(topic, envelopes);
    if (!this.topicsWithSubscriberBus.has(topic)) return failures;
    const more = await this.subscriberBus.publish(topic, envelopes);
    const failed = new Set(failures.map((f) => f.eventId));
    return [...failures, ...more.filter((f) => !failed.has(f.eventId))];
  }
}
