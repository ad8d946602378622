import { marshall } from "@aws-sdk/util-dynamodb";
import type { Envelope } from "../../../schemas";
import { chunk } from "../../core/batching";
import { correlationDigest, digestOfEventId } from "../../core/event-ids";
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
import {
  type BatchGetOptions,
  batchGetByPk,
  MAX_BATCH_GET_KEYS,
  missingIndex,
  queryAll,
  queryWhile,
} from "./reads";
import {
  checkpointKey,
  correlationOfItem,
  EventAttr,
  EventIndex,
  eventIdOfItem,
  failureKey,
  InboxAttr,
  inboxKey,
  LegacyTraceIndex,
  taskOfItem,
} from "./tables";

/** The tables a trace reads through their trace indexes. */
type TraceTable = "events" | "inbox";

/**
 * Each trace index (InboxIndex names the inbox table's as EventIndex names the events table's), and
 * the legacy index that holds its keys on a stack still upgrading: by-correlation for the trace
 * index, by-task for task-roots (it holds every event and row stored before, and each root since).
 */
const TRACE_INDEXES = {
  byCorrelation: [EventIndex.byCorrelation, LegacyTraceIndex.byCorrelation],
  taskRoots: [EventIndex.taskRoots, LegacyTraceIndex.byTask],
} as const satisfies Record<string, readonly [string, string]>;

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
 * What a trace reads, with Query and BatchGetItem only: stored events by correlation or task, and
 * every group's outcomes (inbox rows and failure records) by correlation, task or event id. The
 * events table's trace index holds the first event of each run of a stream's events in one
 * correlation (keys and task only), and the runs are read from the table (Query by stream key);
 * the inbox table's holds every row by correlation, and the rows are read by key (BatchGetItem).
 * Each table's sparse task-roots index holds the correlations of each task.
 * Expired rows are returned too: this is the record of what happened, not the dedup check; but a
 * message kept whole is read without its envelope once its row has expired (its retention is
 * over).
 */
export class DynamoTraceReader implements TraceReader {
  constructor(private readonly options: DynamoTraceReaderOptions) {}

  async eventsByCorrelation(correlationId: string): Promise<Envelope[]> {
    return this.envelopes(await this.eventItems(correlationId));
  }

  async eventsByTask(taskId: string): Promise<Envelope[]> {
    const correlations = await this.eventCorrelationsOf(taskId);
    const found = await Promise.all(correlations.map((c) => this.eventItems(c)));
    return this.envelopes(found.flat().filter((item) => taskOfItem(item) === taskId));
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

  async outcomesByCorrelation(correlationId: string): Promise<OutcomeRecord[]> {
    return this.outcomes(await this.entries("inbox", correlationId));
  }

  /**
   * A task's outcomes: the rows of its correlations (found from its roots in both tables: a row of
   * a stored event has its event's root, a row of an unstored one is a root itself) that name it.
   */
  async outcomesByTask(taskId: string): Promise<OutcomeRecord[]> {
    const [stored, unstored] = await Promise.all([
      this.eventCorrelationsOf(taskId),
      this.correlationsOf("inbox", taskId),
    ]);
    const correlations = [...new Set([...stored, ...unstored])];
    return this.outcomes(await this.entriesOfTask("inbox", correlations, taskId));
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

  /**
   * The correlation of the stored event with this id; undefined when no event has the id. An id
   * stored in `event_id` (minted before ids carried their correlation's digest, or elsewhere) is
   * in by-event-id (keys and the correlation: no read of the item). Any other carries the digest
   * of its correlation: the correlations with entries in trace-by-digest under the digest its id
   * names are read (as a trace reads them) until one holds the id, so an id that only looks like
   * one names no correlation. Either index may be missing while a stack upgrades
   * (`agentbus:traceIndexUpgrade`).
   */
  async correlationOfEvent(eventId: string): Promise<string | undefined> {
    const [entry] = await this.queryOptional(EventIndex.byEventId, EventAttr.eventId, eventId, 1);
    if (entry) return correlationOfItem(entry);
    const entries = await this.queryOptional(
      EventIndex.traceByDigest,
      EventAttr.traceDigest,
      digestOfEventId(eventId),
    );
    for (const correlation of new Set(entries.map(correlationOfItem))) {
      const items = await this.eventItems(correlation);
      if (items.some((item) => eventIdOfItem(item) === eventId)) return correlation;
    }
    return undefined;
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

  /** The trace index's entries of a correlation (keys and task), on either table. */
  private entries(table: TraceTable, correlationId: string): Promise<Record<string, unknown>[]> {
    return this.queryTrace(table, "byCorrelation", EventAttr.correlationId, correlationId);
  }

  /**
   * The event items of a correlation. The trace index holds the first event of each run (a
   * stream's consecutive events in one correlation: ./tables startsRun), the task roots and
   * every event stored before runs; each run is read from the table from its indexed event on,
   * up to the first event of another correlation.
   */
  private async eventItems(correlationId: string): Promise<Record<string, unknown>[]> {
    const [plain, digested] = await Promise.all([
      this.entries("events", correlationId),
      this.digestEntries(correlationId),
    ]);
    const entries = [...plain, ...digested];
    const byStream = new Map<string, number[]>();
    for (const entry of entries) {
      const pk = String(entry[EventAttr.pk]);
      byStream.set(pk, [...(byStream.get(pk) ?? []), Number(entry[EventAttr.version])]);
    }
    const runs = await Promise.all(
      [...byStream].map(([pk, versions]) => this.runsOf(pk, versions, correlationId)),
    );
    return runs.flat();
  }

  /** The runs of one stream that start at (or hold) these versions, each read once. */
  private async runsOf(pk: string, versions: readonly number[], correlationId: string) {
    const items: Record<string, unknown>[] = [];
    let readTo = 0;
    for (const version of [...versions].sort((a, b) => a - b)) {
      if (version <= readTo) continue;
      const run = await queryWhile(
        this.options.client,
        {
          TableName: this.options.tables.events,
          KeyConditionExpression: "#pk = :pk AND #v >= :v",
          ExpressionAttributeNames: { "#pk": EventAttr.pk, "#v": EventAttr.version },
          ExpressionAttributeValues: marshall({ ":pk": pk, ":v": version }),
          Limit: RUN_PAGE,
        },
        (item) => correlationOfItem(item) === correlationId,
      );
      items.push(...run);
      readTo = Math.max(version, Number(run.at(-1)?.[EventAttr.version] ?? 0));
    }
    return items;
  }

  /** The entries of these correlations that name the task. */
  private async entriesOfTask(table: TraceTable, correlations: readonly string[], task: string) {
    const found = await Promise.all(correlations.map((c) => this.entries(table, c)));
    return found.flat().filter((entry) => taskOfItem(entry) === task);
  }

  /**
   * The entries of a correlation's events whose ids carry its digest: trace-by-digest's partition
   * of that digest, the correlation's own (another correlation may share the digest).
   */
  private async digestEntries(correlationId: string): Promise<Record<string, unknown>[]> {
    const entries = await this.queryOptional(
      EventIndex.traceByDigest,
      EventAttr.traceDigest,
      correlationDigest(correlationId),
    );
    return entries.filter((entry) => correlationOfItem(entry) === correlationId);
  }

  /** The correlations of a task's stored events: its roots' in task-roots and digest-task-roots. */
  private async eventCorrelationsOf(taskId: string): Promise<string[]> {
    const [plain, digested] = await Promise.all([
      this.correlationsOf("events", taskId),
      this.queryOptional(EventIndex.digestTaskRoots, EventAttr.taskId, taskId),
    ]);
    return [
      ...new Set([...plain, ...digested.map((root) => String(root[EventAttr.correlationId]))]),
    ];
  }

  /**
   * Every entry of one key in one of the events table's indexes; none while the table does not
   * have the index (a stack that upgrades: lib/infra/README.md). `limit`: at most that many.
   */
  private async queryOptional(
    index: string,
    attribute: string,
    value: string,
    limit?: number,
  ): Promise<Record<string, unknown>[]> {
    try {
      return await queryAll(this.options.client, {
        TableName: this.options.tables.events,
        IndexName: index,
        KeyConditionExpression: "#k = :k",
        ExpressionAttributeNames: { "#k": attribute },
        ExpressionAttributeValues: { ":k": { S: value } },
        ...(limit === undefined ? {} : { Limit: limit }),
      });
    } catch (error) {
      if (missingIndex(error)) return [];
      throw error;
    }
  }

  /** The correlations a task's roots name (the sparse task-roots index). */
  private async correlationsOf(table: TraceTable, taskId: string): Promise<string[]> {
    const roots = await this.queryTrace(table, "taskRoots", EventAttr.taskId, taskId);
    return [...new Set(roots.map((root) => String(root[EventAttr.correlationId])))];
  }

  /**
   * Every entry of one key in a trace index; on a stack that is upgrading
   * (`agentbus:traceIndexUpgrade`) and does not have the index yet, in its legacy counterpart,
   * which holds the same keys (and the whole items).
   */
  private async queryTrace(
    table: TraceTable,
    index: keyof typeof TRACE_INDEXES,
    attribute: string,
    value: string,
  ): Promise<Record<string, unknown>[]> {
    const query = (name: string) =>
      queryAll(this.options.client, {
        TableName: this.options.tables[table],
        IndexName: name,
        KeyConditionExpression: "#k = :k",
        ExpressionAttributeNames: { "#k": attribute },
        ExpressionAttributeValues: { ":k": { S: value } },
      });
    const [current, legacy] = TRACE_INDEXES[index];
    try {
      return await query(current);
    } catch (error) {
      if (!missingIndex(error)) throw error;
      return query(legacy);
    }
  }

  /** The envelopes of event items, in event id order, opened. */
  private async envelopes(items: readonly Record<string, unknown>[]): Promise<Envelope[]> {
    const envelopes = items
      .map((item) => envelopeOfItem(item))
      .sort((a, b) => (a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0));
    return this.options.vault ? this.options.vault.openAll(envelopes) : envelopes;
  }

  /** The inbox rows and failure records the entries point at, in key order, opened. */
  private async outcomes(entries: readonly Record<string, unknown>[]): Promise<OutcomeRecord[]> {
    const items = await this.byKeys(entries.map((entry) => String(entry[InboxAttr.pk])));
    const now = this.now();
    return this.openRecords(
      items
        .sort((a, b) => (String(a.pk) < String(b.pk) ? -1 : String(a.pk) > String(b.pk) ? 1 : 0))
        .map((item) =>
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
 * Events the first page asks for when a run is read from the table (queryWhile doubles it page by
 * page): a run is short as a rule, and a first page that ends one reads at most this many events
 * of another correlation past it.
 */
const RUN_PAGE = 25;

/**
 * False for the row of an id spilled from a state's recent ones (CommitRequest.spill): a dedup
 * record that says nothing else about the event. The state's own record is gone with the id.
 */
function recordsAnOutcome(item: Record<string, unknown>): boolean {
  return item[InboxAttr.eventType] !== undefined;
}
