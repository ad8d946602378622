import { QueryCommand } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { DeleteMessageCommand, type Message, ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { envelopeOfItem } from "../../functions/adapters/dynamodb/deflated-json";
import { hourOf } from "../../functions/adapters/dynamodb/items";
import { batchGetItems } from "../../functions/adapters/dynamodb/reads";
import { EventAttr, EventIndex } from "../../functions/adapters/dynamodb/tables";
import {
  EventBridgePublisher,
  MAX_PUT_EVENTS_ENTRIES,
} from "../../functions/adapters/eventbridge/publisher";
import { type Envelope, registry, type Topic } from "../../schemas";
import { fromSdk } from "./from-sdk";
import type { ClientConfig, OpsStack } from "./stack";

/** The longest window one republish reads (hours). */
export const MAX_WINDOW_HOURS = 7 * 24;

export interface RepublishReport {
  readonly from: string;
  readonly to: string;
  readonly found: number;
  readonly published: number;
  readonly failed: readonly { readonly eventId: string; readonly error: string }[];
  readonly dryRun: boolean;
  /** Relay failure records used (and deleted once their window was republished). */
  readonly failureRecords?: number;
}

/** The hours (`2026-11-30T17`) from `from` to `to`, both included. */
export function hoursBetween(from: Date, to: Date): string[] {
  const hours: string[] = [];
  const start = Date.UTC(
    from.getUTCFullYear(),
    from.getUTCMonth(),
    from.getUTCDate(),
    from.getUTCHours(),
  );
  for (let t = start; t <= to.getTime(); t += 3_600_000)
    hours.push(new Date(t).toISOString().slice(0, 13));
  return hours;
}

/** The keys (stream, version) of the events that occurred in the window, oldest first. */
export async function keysInWindow(stack: OpsStack, from: Date, to: Date) {
  const keys: { pk: string; version: number; at: string }[] = [];
  const low = hourOf(from.toISOString()).occurred_utc;
  const high = hourOf(to.toISOString()).occurred_utc;
  for (const hour of hoursBetween(from, to)) {
    let start: Record<string, never> | undefined;
    do {
      const page = await stack.dynamodb.send(
        new QueryCommand({
          TableName: stack.names.tables.events,
          IndexName: EventIndex.byHour,
          KeyConditionExpression: "#h = :h AND #t BETWEEN :low AND :high",
          ExpressionAttributeNames: { "#h": EventAttr.occurredHour, "#t": EventAttr.occurredUtc },
          ExpressionAttributeValues: {
            ":h": { S: hour },
            ":low": { S: low },
            ":high": { S: high },
          },
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        const row = unmarshall(item);
        keys.push({
          pk: String(row.pk),
          version: Number(row.version),
          at: String(row.occurred_utc),
        });
      }
      start = page.LastEvaluatedKey as typeof start;
    } while (start);
  }
  return keys.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.version - b.version));
}

/** The stored envelopes of these keys (BatchGetItem, 100 keys per call), in the keys' order. */
async function envelopesOf(
  stack: OpsStack,
  keys: readonly { pk: string; version: number }[],
): Promise<Envelope[]> {
  const items = await batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.events,
    keys.map((k) => ({ pk: { S: k.pk }, version: { N: String(k.version) } })),
  );
  const byKey = new Map<string, Envelope>();
  for (const row of items) byKey.set(`${row.pk}#${row.version}`, envelopeOfItem(row));
  const envelopes = keys.flatMap((k) => byKey.get(`${k.pk}#${k.version}`) ?? []);
  // Put on the buses as the relay puts them: opened.
  return stack.vault ? stack.vault.openAll(envelopes) : envelopes;
}

/** Publish envelopes to their topics' buses, 10 per PutEvents call, as the relay does. */
async function publishAll(stack: OpsStack, config: ClientConfig, envelopes: readonly Envelope[]) {
  const client = new EventBridgeClient(config);
  const publisher = new EventBridgePublisher({
    client: fromSdk(client),
    buses: stack.names.buses as Partial<Record<Topic, string>>,
  });
  const failed: { eventId: string; error: string }[] = [];
  try {
    const byTopic = new Map<Topic, Envelope[]>();
    for (const e of envelopes) {
      const topic = registry.get(e.event_type, e.schema_version)?.topic;
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
 * Put the stored events that occurred in a time window on their buses again, read from the
 * events table (the outbox), not from the stream, which keeps 24 hours only. Consumers
 * deduplicate (inbox and version gate), so republishing what was delivered changes nothing.
 */
export async function republishWindow(
  stack: OpsStack,
  config: ClientConfig,
  window: { readonly from: Date; readonly to: Date; readonly dryRun?: boolean },
): Promise<RepublishReport> {
  const keys = await keysInWindow(stack, window.from, window.to);
  const base = { from: window.from.toISOString(), to: window.to.toISOString(), found: keys.length };
  if (window.dryRun) return { ...base, published: 0, failed: [], dryRun: true };
  const envelopes = await envelopesOf(stack, keys);
  const failed = await publishAll(stack, config, envelopes);
  return { ...base, published: envelopes.length - failed.length, failed, dryRun: false };
}

/** The window of a relay failure record (the stream batch the relay gave up on), padded 1 min. */
export function windowOfFailure(message: Message): { from: Date; to: Date } | undefined {
  try {
    const body = JSON.parse(message.Body ?? "") as {
      DDBStreamBatchInfo?: {
        approximateArrivalOfFirstRecord?: string;
        approximateArrivalOfLastRecord?: string;
      };
    };
    const info = body.DDBStreamBatchInfo;
    const first = Date.parse(info?.approximateArrivalOfFirstRecord ?? "");
    const last = Date.parse(info?.approximateArrivalOfLastRecord ?? "");
    if (Number.isNaN(first) || Number.isNaN(last)) return undefined;
    return { from: new Date(first - 60_000), to: new Date(last + 60_000) };
  } catch {
    return undefined;
  }
}

/**
 * Republish the windows of the relay's failure records, each deleted from the failure queue once
 * its window is republished without a failure.
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
      const window = windowOfFailure(m);
      if (!window) continue;
      const report = await republishWindow(stack, config, { ...window, dryRun });
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
