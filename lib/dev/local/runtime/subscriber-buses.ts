import { randomUUID } from "node:crypto";
import { DeleteMessageCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type {
  SubscriberBusClient,
  SubscriberBusEntry,
  SubscriberBusPutEvents,
  SubscriberBusPutEventsResult,
} from "../../../../functions/adapters/eventbridge/subscriber-bus";
import type {
  PointInTimeSubscriberRequest,
  SubscriberDescription,
} from "../../../operator/replay-subscriber";
import { inMeterScope, SERVICE_SCOPES } from "../../metering/metering";
import type { LocalBridge, LocalSubscriber, LocalSubscriberBus } from "../deploy";
import type { Activity } from "./activity";
import type { Report } from "./events";
import { matches } from "./filters";
import { receiveLoop } from "./receive";

/**
 * EventBridge's new buses and their subscribers, emulated in process from the template (no
 * emulator has them), as the service is described in AWS's reference (aws/agent-toolkit-for-aws,
 * amazon-eventbridge-event-bus/SKILL.md chapters 5-8, 11, 12 and 17):
 * - `PutEvents` keeps each entry for the bus's retention and answers `PUBLISHED`, or
 *   `DEDUPLICATED` for a `DeduplicationId` seen in the last 5 minutes;
 * - an event is delivered as `Data` (the classic envelope, for `PutEvents`) with its
 *   `SystemMetadata`, to every subscriber whose `DATA` filters all match;
 * - a subscriber to SQS sends the `RAW` payload with its group and deduplication ids, evaluated
 *   from `{% $events.<path> %}` expressions; a delivery that still fails after its retries sends a
 *   record naming the event, without its payload, to the on-failure queue.
 * Delivery happens inside the publishing call, one entry after the other, so a FIFO subscriber's
 * order within an event group holds, and an event that cannot be delivered holds up what follows
 * it while it is retried.
 */

/** Deduplication window of `DeduplicationId` (SKILL.md chapter 11). */
const DEDUPLICATION_MS = 5 * 60 * 1000;
/** Retries the local runtime makes of a failed delivery, whatever the subscriber allows. */
const MAX_LOCAL_RETRIES = 2;

/** An event as the bus keeps it: what a subscriber's expressions see as `$events`. */
export interface BusEvent {
  readonly Data: Record<string, unknown>;
  readonly SystemMetadata: Readonly<Record<string, string>>;
  readonly publishedAt: number;
}

export interface SubscriberBusesOptions {
  readonly buses: readonly LocalSubscriberBus[];
  readonly subscribers: readonly LocalSubscriber[];
  readonly sqs: SQSClient;
  readonly queueUrl: (arn: string) => string;
  readonly region: string;
  readonly accountId: string;
  readonly report?: Report;
  readonly now?: () => number;
}

export class LocalSubscriberBuses implements SubscriberBusClient {
  private readonly retained = new Map<string, BusEvent[]>();
  private readonly seen = new Map<string, Map<string, number>>();
  private readonly created = new Set<string>();
  private readonly now: () => number;
  /** When the buses without a `createdAt` of their own were created: when emulation began. */
  private readonly startedAt: number;

  constructor(private readonly options: SubscriberBusesOptions) {
    this.now = options.now ?? Date.now;
    this.startedAt = this.now();
  }

  async putEvents(request: SubscriberBusPutEvents): Promise<SubscriberBusPutEventsResult> {
    const bus = this.options.buses.find((b) => b.arn === request.EventBusArn);
    if (!bus)
      throw Object.assign(new Error(`no event bus ${request.EventBusArn}`), {
        name: "ResourceNotFoundException",
        $fault: "client",
      });
    const results: { EventId: string; SuccessCode: string }[] = [];
    for (const entry of request.Entries) {
      const id = randomUUID();
      if (this.isDuplicate(bus.arn, entry.SystemMetadata.DeduplicationId)) {
        results.push({ EventId: id, SuccessCode: "DEDUPLICATED" });
        continue;
      }
      const event = this.eventOf(id, entry, "LIVE");
      this.retain(bus, event);
      for (const subscriber of this.subscribersOf(bus.arn)) await this.deliver(subscriber, event);
      results.push({ EventId: id, SuccessCode: "PUBLISHED" });
    }
    return { Entries: results, FailedEntryCount: 0 };
  }

  /**
   * An event a classic rule forwarded (Topic.subscriberBus's bridge): it arrives as the whole
   * classic envelope in `Data`, with its source and detail-type in `SystemMetadata` and no event
   * group (eventbridge-event-bus/SKILL.md chapter 4).
   */
  async forward(busArn: string, classic: Record<string, unknown>): Promise<void> {
    const bus = this.options.buses.find((b) => b.arn === busArn);
    if (!bus) throw new Error(`no event bus ${busArn}`);
    const event: BusEvent = {
      Data: classic,
      SystemMetadata: {
        "aws:Source": String(classic.source),
        "aws:DetailType": String(classic["detail-type"]),
        "aws:DeliveryType": "LIVE",
      },
      publishedAt: this.now(),
    };
    this.retain(bus, event);
    for (const subscriber of this.subscribersOf(bus.arn)) await this.deliver(subscriber, event);
  }

  /** The events the bus still keeps, oldest first, published at or after `since` (epoch ms). */
  retainedSince(busArn: string, since: number): readonly BusEvent[] {
    return (this.retained.get(busArn) ?? []).filter((e) => e.publishedAt >= since);
  }

  /** Send one event through a subscriber, as a delivery of `deliveryType` (`LIVE` or `REPLAY`). */
  async deliver(subscriber: LocalSubscriber, event: BusEvent): Promise<void> {
    if (!subscriber.patterns.every((p) => matches(event.Data, p))) return;
    const target = this.options.queueUrl(subscriber.targetArn);
    const message = {
      QueueUrl: target,
      MessageBody: JSON.stringify(
        subscriber.transformer ? transform(subscriber.transformer, event) : event.Data,
      ),
      ...(subscriber.messageGroupId
        ? { MessageGroupId: evaluate(subscriber.messageGroupId, event) }
        : {}),
      ...(subscriber.messageDeduplicationId
        ? { MessageDeduplicationId: evaluate(subscriber.messageDeduplicationId, event) }
        : {}),
    };
    const attempts = 1 + Math.min(subscriber.maxRetryAttempts, MAX_LOCAL_RETRIES);
    let lastError: unknown;
    for (let attempt = 0; attempt < attempts; attempt++) {
      try {
        await inMeterScope(SERVICE_SCOPES.subscriber, () =>
          this.options.sqs.send(new SendMessageCommand(message)),
        );
        this.options.report?.({
          kind: "subscribed",
          subscriber: subscriber.logicalId,
          messages: 1,
        });
        return;
      } catch (error) {
        lastError = error;
      }
    }
    await this.deadLetter(subscriber, event, lastError);
  }

  /** A record of what could not be delivered: which event, when, why; not its payload. */
  private async deadLetter(subscriber: LocalSubscriber, event: BusEvent, error: unknown) {
    const report = this.options.report;
    report?.({ kind: "invocation-failed", function: subscriber.logicalId, error: String(error) });
    if (!subscriber.onFailureArn) return;
    const record = {
      eventId: event.Data.id,
      eventTime: new Date(event.publishedAt).toISOString(),
      subscriber: subscriber.name,
      busArn: subscriber.busArn,
      errorMessage: String(error),
    };
    await inMeterScope(SERVICE_SCOPES.subscriber, () =>
      this.options.sqs.send(
        new SendMessageCommand({
          QueueUrl: this.options.queueUrl(subscriber.onFailureArn as string),
          MessageBody: JSON.stringify(record),
        }),
      ),
    );
  }

  /**
   * A bus of the template, as `DescribeEventBus` would describe it: its name and retention, with
   * `RetentionWindowStartTime`, the earliest point a subscriber can read from: the later of now
   * less the retention period and the bus's creation (EventBridge user guide, "Replaying retained
   * events to a subscriber"; aws/agent-toolkit-for-aws amazon-eventbridge-event-bus
   * references/replay-and-recovery.md).
   */
  describeEventBus(arn: string) {
    const bus = this.options.buses.find((b) => b.arn === arn);
    if (!bus)
      throw Object.assign(new Error(`no event bus ${arn}`), {
        name: "ResourceNotFoundException",
        $fault: "client",
      });
    return {
      EventBusArn: bus.arn,
      Name: bus.name,
      StorageConfiguration: {
        RetentionPeriodInDays: bus.retentionDays,
        RetentionWindowStartTime: new Date(
          Math.max(this.now() - bus.retentionDays * 86_400_000, bus.createdAt ?? this.startedAt),
        ),
      },
    };
  }

  /** A subscriber of the template, as `DescribeSubscriber` would describe it. */
  describeSubscriber(name: string): SubscriberDescription {
    const s = this.options.subscribers.find((x) => x.name === name);
    if (!s)
      throw Object.assign(new Error(`no subscriber ${name}`), {
        name: "ResourceNotFoundException",
        $fault: "client",
      });
    return {
      Name: s.name,
      EventBusArn: s.busArn,
      Type: s.fifo ? "FIFO" : "UNORDERED",
      FilterConfiguration: {
        Filters: s.patterns.map((p) => ({ Scope: "DATA", Pattern: JSON.stringify(p) })),
      },
      InvokeConfiguration: {
        TargetArn: s.targetArn,
        // IAM is not emulated: the local runtime delivers as itself.
        RoleArn: "local",
        SqsParameters: { ...(s.messageGroupId ? { MessageGroupId: s.messageGroupId } : {}) },
      },
      ...(s.onFailureArn ? { OnFailureConfiguration: { Arn: s.onFailureArn } } : {}),
      RetryPolicy: { MaxRetryAttempts: s.maxRetryAttempts },
    };
  }

  /**
   * A point-in-time subscriber (a replay): it delivers what the bus kept from `StartingPoint` to
   * `EndPoint` (seconds since the epoch), in the order it was published, marked `REPLAY`, then
   * ends. The same request again (its `ClientToken`) creates nothing and delivers nothing again. A
   * starting point before the bus's retention window is refused, as the service refuses it.
   */
  async createSubscriber(request: PointInTimeSubscriberRequest): Promise<{ created: boolean }> {
    if (this.created.has(request.ClientToken)) return { created: false };
    const { StartingPoint, EndPoint } = request.PointInTimeConfiguration;
    const windowStart = this.describeEventBus(request.EventBusArn).StorageConfiguration
      .RetentionWindowStartTime;
    if (StartingPoint * 1000 < windowStart.getTime())
      throw Object.assign(
        new Error(
          `StartingPoint ${new Date(StartingPoint * 1000).toISOString()} is before the retention window (${windowStart.toISOString()})`,
        ),
        { name: "ValidationException", $fault: "client" },
      );
    this.created.add(request.ClientToken);
    const replay: LocalSubscriber = {
      logicalId: request.Name,
      name: request.Name,
      busArn: request.EventBusArn,
      fifo: request.Type === "FIFO",
      patterns: (request.FilterConfiguration?.Filters ?? []).map((f) => JSON.parse(f.Pattern)),
      targetArn: request.InvokeConfiguration.TargetArn,
      messageGroupId: request.InvokeConfiguration.SqsParameters.MessageGroupId,
      messageDeduplicationId: request.InvokeConfiguration.SqsParameters.MessageDeduplicationId,
      onFailureArn: request.OnFailureConfiguration?.Arn,
      maxRetryAttempts: request.RetryPolicy?.MaxRetryAttempts ?? 5,
      transformer: request.Transformer.JsonataConfiguration.Expression,
    };
    const kept = this.retainedSince(request.EventBusArn, StartingPoint * 1000).filter(
      (e) => e.publishedAt < EndPoint * 1000,
    );
    for (const event of kept)
      await this.deliver(replay, {
        ...event,
        SystemMetadata: { ...event.SystemMetadata, "aws:DeliveryType": "REPLAY" },
      });
    return { created: true };
  }

  subscribersOf(busArn: string): LocalSubscriber[] {
    return this.options.subscribers.filter((s) => s.busArn === busArn);
  }

  /** The event as the bus keeps it: a `PutEvents` payload is the classic envelope. */
  eventOf(id: string, entry: SubscriberBusEntry, deliveryType: string): BusEvent {
    const publishedAt = this.now();
    return {
      Data: {
        version: "0",
        id,
        "detail-type": entry.DetailType,
        source: entry.Source,
        account: this.options.accountId,
        time: (entry.Time ?? new Date(publishedAt)).toISOString().replace(/\.\d{3}Z$/, "Z"),
        region: this.options.region,
        resources: [],
        detail: JSON.parse(entry.Detail) as unknown,
      },
      SystemMetadata: { ...entry.SystemMetadata, "aws:DeliveryType": deliveryType },
      publishedAt,
    };
  }

  private isDuplicate(busArn: string, deduplicationId: string | undefined): boolean {
    if (!deduplicationId) return false;
    const seen = this.seen.get(busArn) ?? new Map<string, number>();
    this.seen.set(busArn, seen);
    const now = this.now();
    const last = seen.get(deduplicationId);
    if (last !== undefined && now - last < DEDUPLICATION_MS) return true;
    seen.set(deduplicationId, now);
    return false;
  }

  private retain(bus: LocalSubscriberBus, event: BusEvent): void {
    const horizon = this.now() - bus.retentionDays * 24 * 60 * 60 * 1000;
    const kept = (this.retained.get(bus.arn) ?? []).filter((e) => e.publishedAt >= horizon);
    kept.push(event);
    this.retained.set(bus.arn, kept);
  }
}

/** A classic rule's forwarding to a new bus: what it delivered to its queue, forwarded in order. */
export function runBridge(
  activity: Activity,
  sqs: SQSClient,
  bridge: LocalBridge,
  buses: LocalSubscriberBuses,
): Promise<void> {
  const options = { url: bridge.queueUrl, batchSize: 10, name: bridge.logicalId };
  return receiveLoop(activity, sqs, options, async (messages) => {
    for (const m of messages) {
      try {
        await buses.forward(bridge.busArn, JSON.parse(m.Body ?? "{}") as Record<string, unknown>);
        await sqs.send(
          new DeleteMessageCommand({ QueueUrl: bridge.queueUrl, ReceiptHandle: m.ReceiptHandle }),
        );
      } catch (error) {
        // Left on the queue: forwarded again after its visibility timeout.
        activity.report({
          kind: "invocation-failed",
          function: bridge.logicalId,
          error: String(error),
        });
      }
    }
  });
}

/**
 * A target parameter: a literal, or the JSONata AgentBus writes, evaluated on the event:
 * `{% $events.<dotted path> %}`, optionally followed by `& '<literal>'`.
 */
export function evaluate(parameter: string, event: BusEvent): string {
  const expression = /^\{%\s*(.*?)\s*%\}$/.exec(parameter)?.[1];
  if (expression === undefined) return parameter;
  const match = /^\$events\.([A-Za-z0-9_.:-]+)(?:\s*&\s*'([^']*)')?$/.exec(expression);
  if (!match?.[1])
    throw new Error(`the local runtime evaluates only $events.<path> [& '...'], not ${expression}`);
  let value: unknown = event;
  for (const part of match[1].split("."))
    value = (value as Record<string, unknown> | undefined)?.[part];
  if (value === undefined || value === null) throw new Error(`${expression} is not in the event`);
  return String(value) + (match[2] ?? "");
}

/** A `JSONATA` transformer of the form a replay uses: `$merge([$events.Data, {<JSON object>}])`. */
export function transform(expression: string, event: BusEvent): unknown {
  const object = /^\{%\s*\$merge\(\[\$events\.Data,\s*(\{.*\})\]\)\s*%\}$/.exec(expression)?.[1];
  if (!object) throw new Error("the local runtime transforms only $merge([$events.Data, {...}])");
  return { ...event.Data, ...(JSON.parse(object) as Record<string, unknown>) };
}
