import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { DeleteMessageCommand, type Message, ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { envelopeOfItem } from "../../functions/adapters/dynamodb/deflated-json";
import { storedTopicOf } from "../../functions/adapters/dynamodb/items";
import { batchGetItems } from "../../functions/adapters/dynamodb/reads";
import {
  type RelayFailureKey,
  relayFailureKeysOf,
} from "../../functions/adapters/dynamodb/relay-failure";
import {
  EventBridgePublisher,
  MAX_PUT_EVENTS_ENTRIES,
} from "../../functions/adapters/eventbridge/publisher";
import { type Envelope, registry, type Topic } from "../../schemas";
import { fromSdk } from "./from-sdk";
import type { ClientConfig, OpsStack } from "./stack";
import {
  keysAtPositions,
  keysInStreamWindow,
  STREAM_RETENTION_HOURS,
  StreamExpired,
  type StreamPositions,
} from "./stream-reads";

/** The longest window one republish reads (hours): what the events table's stream keeps. */
export const MAX_WINDOW_HOURS = STREAM_RETENTION_HOURS;

export interface RepublishReport {
  /** What was republished: a window (`from .. to`), or a failure record's events. */
  readonly what: string;
  readonly found: number;
  readonly published: number;
  readonly failed: readonly { readonly eventId: string; readonly error: string }[];
  readonly dryRun: boolean;
  /** Relay failure records used (and deleted once their events were republished). */
  readonly failureRecords?: number;
}

/**
 * The stored envelopes of these keys (BatchGetItem, 100 keys per call), in the keys' order, and
 * the topic stored with each (EventAttr.topic), by event id.
 */
async function envelopesOf(
  stack: OpsStack,
  keys: readonly { pk: string; version: number }[],
): Promise<{ envelopes: Envelope[]; topics: Map<string, Topic> }> {
  const items = await batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.events,
    keys.map((k) => ({ pk: { S: k.pk }, version: { N: String(k.version) } })),
  );
  const byKey = new Map<string, Envelope>();
  const topics = new Map<string, Topic>();
  for (const row of items) {
    const envelope = envelopeOfItem(row);
    byKey.set(`${row.pk}#${row.version}`, envelope);
    const topic = storedTopicOf(row);
    if (topic) topics.set(envelope.event_id, topic);
  }
  const envelopes = keys.flatMap((k) => byKey.get(`${k.pk}#${k.version}`) ?? []);
  // Put on the buses as the relay puts them: as stored, their personal fields sealed.
  return { envelopes, topics };
}

/**
 * Publish envelopes to their topics' buses, 10 per PutEvents call, as the relay does: the topic
 * stored with each, else its type's in this tool's registry.
 */
async function publishAll(
  stack: OpsStack,
  config: ClientConfig,
  { envelopes, topics }: { envelopes: readonly Envelope[]; topics: ReadonlyMap<string, Topic> },
) {
  const client = new EventBridgeClient(config);
  const publisher = new EventBridgePublisher({
    client: fromSdk(client),
    buses: stack.names.buses as Partial<Record<Topic, string>>,
  });
  const failed: { eventId: string; error: string }[] = [];
  try {
    const byTopic = new Map<Topic, Envelope[]>();
    for (const e of envelopes) {
      const topic = topics.get(e.event_id) ?? registry.get(e.event_type, e.schema_version)?.topic;
      if (!topic) failed.push({ eventId: e.event_id, error: `unknown event type ${e.event_type}` });
      else byTopic.set(topic, [...(byTopic.get(topic) ?? []), e]);
    }
    for (const [topic, list] of byTopic)
      for (let i = 0; i < list.length; i += MAX_PUT_EVENTS_ENTRIES)
        for (const f of await publisher.publish(topic, list.slice(i, i + MAX_PUT_EVENTS_ENTRIES)))
          failed.push({ eventId: f.eventId, error: `${f.code}: ${f.message}` });
  } finally {
    client.destroy();
  }
  return failed;
}

/**
 * Put the stored events that occurred in a time window on their buses again, found in the events
 * table's stream (which keeps 24 hours: StreamExpired for a window that starts before) and read
 * from the table (the outbox). Consumers deduplicate (inbox and version gate), so republishing
 * what was delivered changes nothing.
 */
export async function republishWindow(
  stack: OpsStack,
  config: ClientConfig,
  window: {
    readonly from: Date;
    readonly to: Date;
    readonly dryRun?: boolean;
    readonly now?: Date;
  },
): Promise<RepublishReport> {
  const oldest = (window.now ?? new Date()).getTime() - STREAM_RETENTION_HOURS * 3_600_000;
  if (window.from.getTime() < oldest)
    throw new StreamExpired(`the window from ${window.from.toISOString()}`);
  const keys = await keysInStreamWindow(stack, window.from, window.to);
  const what = `${window.from.toISOString()} .. ${window.to.toISOString()}`;
  return republishKeys(stack, config, what, keys, window.dryRun === true);
}

async function republishKeys(
  stack: OpsStack,
  config: ClientConfig,
  what: string,
  keys: readonly { pk: string; version: number }[],
  dryRun: boolean,
): Promise<RepublishReport> {
  const base = { what, found: keys.length };
  if (dryRun) return { ...base, published: 0, failed: [], dryRun: true };
  const stored = await envelopesOf(stack, keys);
  const failed = await publishAll(stack, config, stored);
  return { ...base, published: stored.envelopes.length - failed.length, failed, dryRun: false };
}

/**
 * What a failure queue message names: the relay's record of the keys it could not publish, or the
 * stream event source's record of a batch's stream positions; undefined for anything else.
 */
export function failureOf(
  message: Message,
): { keys: RelayFailureKey[] } | { positions: StreamPositions } | undefined {
  let body: unknown;
  try {
    body = JSON.parse(message.Body ?? "");
  } catch {
    return undefined;
  }
  const keys = relayFailureKeysOf(body);
  if (keys) return { keys };
  const info = (body as { DDBStreamBatchInfo?: Record<string, unknown> } | undefined)
    ?.DDBStreamBatchInfo;
  const [shardId, start, end] = [info?.shardId, info?.startSequenceNumber, info?.endSequenceNumber];
  if (typeof shardId !== "string" || typeof start !== "string" || typeof end !== "string")
    return undefined;
  const streamArn = typeof info?.streamArn === "string" ? info.streamArn : undefined;
  return {
    positions: {
      shardId,
      startSequenceNumber: start,
      endSequenceNumber: end,
      ...(streamArn ? { streamArn } : {}),
    },
  };
}

/** The events of one failure record, republished (StreamExpired: positions the stream lost). */
async function republishRecord(
  stack: OpsStack,
  config: ClientConfig,
  failure: NonNullable<ReturnType<typeof failureOf>>,
  dryRun: boolean,
): Promise<RepublishReport> {
  if ("keys" in failure)
    return republishKeys(
      stack,
      config,
      `relay failure record (${failure.keys.length} event(s))`,
      failure.keys,
      dryRun,
    );
  const { positions } = failure;
  const keys = await keysAtPositions(stack, positions);
  const what = `stream batch ${positions.startSequenceNumber}..${positions.endSequenceNumber}`;
  return republishKeys(stack, config, what, keys, dryRun);
}

/**
 * Republish the events of the relay's failure records, each record deleted from the failure queue
 * once its events are republished without a failure. A record of stream positions older than the
 * stream keeps is reported and left in the queue.
 */
export async function republishFailures(
  stack: OpsStack,
  config: ClientConfig,
  dryRun = false,
): Promise<RepublishReport[]> {
  const url = stack.names.relayFailureQueue;
  const reports: RepublishReport[] = [];
  for (let round = 0; round < 100; round++) {
    const { Messages = [] } = await stack.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 300 }),
    );
    if (Messages.length === 0) break;
    for (const m of Messages) {
      const failure = failureOf(m);
      if (!failure) continue;
      const report = await republishRecord(stack, config, failure, dryRun).catch((error) => {
        if (!(error instanceof StreamExpired)) throw error;
        return {
          what: "stream batch",
          found: 0,
          published: 0,
          dryRun,
          failed: [{ eventId: "-", error: error.message }],
        };
      });
      reports.push({ ...report, failureRecords: 1 });
      if (!dryRun && report.failed.length === 0)
        await stack.sqs.send(
          new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }),
        );
    }
    if (dryRun) break;
  }
  return reports;
}
