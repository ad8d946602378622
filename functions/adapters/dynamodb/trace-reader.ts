import type { Envelope } from "../../../schemas";
import { chunk } from "../../core/batching";
import type { Vault } from "../../core/personal-data/vault";
import type {
  Clock,
  GroupEvent,
  GroupStream,
  InboxRecord,
  OutcomeRecord,
  TraceReader,
} from "../../core/ports";
import { withinRetention } from "../../core/retention";
import { systemClock } from "../../core/runtime";
import type { AwsClient } from "../aws/client";
import { envelopeOfItem } from "./deflated-json";
import {
  type CheckpointItem,
  type FailureItem,
  type InboxItem,
  inboxRecordOf,
  outcomeRecordOf,
} from "./items";
import { type BatchGetOptions, batchGetByPk, MAX_BATCH_GET_KEYS, queryAll } from "./reads";
import {
  checkpointKey,
  EventAttr,
  EventIndex,
  failureKey,
  InboxAttr,
  InboxIndex,
  inboxKey,
} from "./tables";

export interface DynamoTraceReaderOptions {
  readonly client: AwsClient;
  readonly tables: { readonly events: string; readonly inbox: string };
  readonly batchGet?: BatchGetOptions;
  /** What "now" is when a row's time to live is read (the system clock by default). */
  readonly clock?: Clock;
  /** Opens the sealed personal fields of what it reads (functions/core/personal-data/vault.ts). */
  readonly vault?: Vault;
}

/**
 * What a trace reads, with Query and BatchGetItem only: stored events by correlation or task (the
 * events table's indexes), and every group's outcomes (inbox rows and failure records) by
 * correlation, task or event id (the inbox table's indexes, or its keys). Expired rows are
 * returned too: this is the record of what happened, not the dedup check; but a message kept
 * whole is read without its envelope once its row has expired (its retention is over).
 */
export class DynamoTraceReader implements TraceReader {
  constructor(private readonly options: DynamoTraceReaderOptions) {}

  eventsByCorrelation(correlationId: string): Promise<Envelope[]> {
    return this.events(EventIndex.byCorrelation, EventAttr.correlationId, correlationId);
  }

  eventsByTask(taskId: string): Promise<Envelope[]> {
    return this.events(EventIndex.byTask, EventAttr.taskId, taskId);
  }

  /** Inbox rows of one group, in the order of `eventIds` (unknown ids left out). */
  async inboxRecords(group: string, eventIds: readonly string[]): Promise<InboxRecord[]> {
    const found = await this.byKeys(eventIds.map((id) => inboxKey(group, id)));
    const rows = new Map(
      found.filter(recordsAnOutcome).map((item) => {
        const record = withinRetention(inboxRecordOf(item as unknown as InboxItem), this.now());
        return [record.eventId, record];
      }),
    );
    return this.openRecords(
      eventIds.flatMap((id) => {
        const row = rows.get(id);
        return row ? [row] : [];
      }),
    );
  }

  outcomesByCorrelation(correlationId: string): Promise<OutcomeRecord[]> {
    return this.outcomes(InboxIndex.byCorrelation, InboxAttr.correlationId, correlationId);
  }

  outcomesByTask(taskId: string): Promise<OutcomeRecord[]> {
    return this.outcomes(InboxIndex.byTask, InboxAttr.taskId, taskId);
  }

  async outcomesOfEvent(groups: readonly string[], eventId: string): Promise<OutcomeRecord[]> {
    const keys = groups.flatMap((g) => [inboxKey(g, eventId), failureKey(g, eventId)]);
    const found = await this.byKeys(keys);
    const now = this.now();
    return this.openRecords(
      found
        .filter(recordsAnOutcome)
        .map((item) =>
          withinRetention(outcomeRecordOf(item as unknown as InboxItem | FailureItem), now),
        ),
    );
  }

  async groupCheckpoints(keys: readonly GroupStream[]): Promise<number[]> {
    const found = await this.byKeys(keys.map((k) => checkpointKey(k.group, k.stream)));
    const versions = new Map(
      found.map((item) => [(item as unknown as CheckpointItem).pk, Number(item.version)]),
    );
    return keys.map((k) => versions.get(checkpointKey(k.group, k.stream)) ?? 0);
  }

  async spilled(keys: readonly GroupEvent[]): Promise<boolean[]> {
    const found = await this.byKeys(keys.map((k) => inboxKey(k.group, k.eventId)));
    const now = this.now().getTime() / 1000;
    const live = new Set(
      found
        .filter((item) => item[InboxAttr.spilled] === true && Number(item[InboxAttr.ttl]) > now)
        .map((item) => String(item[InboxAttr.pk])),
    );
    return keys.map((k) => live.has(inboxKey(k.group, k.eventId)));
  }

  private async events(index: string, attribute: string, value: string): Promise<Envelope[]> {
    const items = await queryAll(this.options.client, {
      TableName: this.options.tables.events,
      IndexName: index,
      KeyConditionExpression: "#k = :k",
      ExpressionAttributeNames: { "#k": attribute },
      ExpressionAttributeValues: { ":k": { S: value } },
    });
    const envelopes = items
      .map((item) => envelopeOfItem(item))
      .sort((a, b) => (a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0));
    return this.options.vault ? this.options.vault.openAll(envelopes) : envelopes;
  }

  private async outcomes(index: string, attribute: string, value: string) {
    const items = await queryAll(this.options.client, {
      TableName: this.options.tables.inbox,
      IndexName: index,
      KeyConditionExpression: "#k = :k",
      ExpressionAttributeNames: { "#k": attribute },
      ExpressionAttributeValues: { ":k": { S: value } },
    });
    const now = this.now();
    return this.openRecords(
      items.map((item) =>
        withinRetention(outcomeRecordOf(item as unknown as InboxItem | FailureItem), now),
      ),
    );
  }

  /** Records with the messages they keep opened. */
  private async openRecords<R extends OutcomeRecord>(records: R[]): Promise<R[]> {
    const vault = this.options.vault;
    return vault ? Promise.all(records.map((r) => vault.openRecord(r))) : records;
  }

  private now(): Date {
    return (this.options.clock ?? systemClock).now();
  }

  /** Inbox-table items by key, in batches of 100 (eventually consistent: a tracing view). */
  private async byKeys(pks: readonly string[]): Promise<Record<string, unknown>[]> {
    const table = this.options.tables.inbox;
    const found: Record<string, unknown>[] = [];
    for (const batch of chunk([...new Set(pks)], () => 1, MAX_BATCH_GET_KEYS, Infinity)) {
      const got = await batchGetByPk(
        this.options.client,
        batch.map((pk) => ({ table, pk })),
        false,
        this.options.batchGet,
      );
      found.push(...(got.get(table) ?? []));
    }
    return found;
  }
}

/**
 * False for the row of an id spilled from a state's recent ones (CommitRequest.spill): a dedup
 * record that says nothing else about the event. The state's own record is gone with the id.
 */
function recordsAnOutcome(item: Record<string, unknown>): boolean {
  return item[InboxAttr.eventType] !== undefined;
}
