import type { CancellationReason, Update } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import {
  type AggregateRef,
  registry as defaultRegistry,
  type Envelope,
  type EventRegistry,
} from "../../../schemas";
import { sleep } from "../../core/batching";
import { PermanentError } from "../../core/errors";
import { checkpointOn, mayHaveSpilled } from "../../core/gate-records";
import type { Vault } from "../../core/personal-data/vault";
import type {
  Clock,
  CommitRequest,
  EventStore,
  GroupEvent,
  GroupStream,
  InboxRecord,
  Loaded,
  LoadRequest,
  OutcomeRecord,
  TraceReader,
} from "../../core/ports";
import { systemClock } from "../../core/runtime";
import type { AwsClient } from "../aws/client";
import { GetItem, PutItem, TransactWriteItems, UpdateItem } from "../aws/operations";
import {
  type Action,
  cancellationError,
  commitActions,
  type Item,
  type TopicOf,
} from "./commit-actions";
import { envelopeOfItem } from "./deflated-json";
import { dynamoFailure } from "./failure";
import {
  type CheckpointItem,
  type EventItem,
  type InboxItem,
  inboxRowLive,
  type StateItem,
  storedStateOf,
} from "./items";
import { type BatchGetOptions, batchGetByPk, queryAll } from "./reads";
import { checkpointKey, EventAttr, inboxKey, streamKey } from "./tables";
import { DynamoTraceReader } from "./trace-reader";

/** TransactWriteItems takes at most 100 actions. */
export const MAX_TRANSACTION_ACTIONS = 100;

export interface DynamoEventStoreOptions {
  /**
   * The low-level DynamoDB client, created once per container by the caller. The store marshals
   * items itself (util-dynamodb, `removeUndefinedValues`) so that the behaviour does not depend on
   * how a caller configured a DocumentClient, and so that CancellationReasons (which a
   * DocumentClient does not unmarshal) are handled in one representation.
   */
  readonly client: AwsClient;
  readonly tables: { readonly state: string; readonly events: string; readonly inbox: string };
  /** Decides whether inbox rows have expired (TTL deletes lazily). */
  readonly clock?: Clock;
  /** Rounds of BatchGetItem for UnprocessedKeys before giving up with a TransientError. */
  readonly maxBatchGetAttempts?: number;
  readonly wait?: (ms: number) => Promise<void>;
  /**
   * While a stack that kept checkpoints and inbox dedup in rows of the inbox table upgrades:
   * `load` reads those rows too (one BatchGetItem, as before) and takes the later checkpoint.
   */
  readonly legacyCheckpoints?: boolean;
  /**
   * Seals the personal fields of what a commit appends or keeps (functions/core/personal-data/
   * vault.ts); DynamoEventStore, the operator's, opens them on every read as well. The consumer's
   * store reads them sealed: its pipeline opens only those its role reads. Absent, they are
   * stored as they come.
   */
  readonly vault?: Vault;
  /**
   * Where the topic stored with each appended event is read (EventAttr.topic): the registry of the
   * function that commits, which knows its application's types. @default the global registry
   */
  readonly registry?: EventRegistry;
}

/**
 * The event store on DynamoDB, as a consumer uses it: state, events (event store + outbox) and
 * inbox tables. Behaves exactly like InMemoryEventStore (functions/core/memory.ts); the shared
 * contract test in test/adapters runs the same cases against both. The functions construct this
 * one; DynamoEventStore adds the trace reads, which no function makes, and so stays out of their
 * bundles.
 *
 * `commit` is hand-written rather than delegated to a mapper library because the inbox row, the
 * checkpoint, the state item and the appended events must share ONE TransactWriteItems (and its
 * CancellationReasons must be mapped back to the port's errors by item index).
 */
export class DynamoConsumerStore implements EventStore {
  protected readonly client: AwsClient;
  protected readonly tables: DynamoEventStoreOptions["tables"];
  protected readonly clock: Clock;
  protected readonly batchOptions: BatchGetOptions;
  private readonly legacy: boolean;
  protected readonly vault: Vault | undefined;
  private readonly topicOf: TopicOf;

  constructor(options: DynamoEventStoreOptions) {
    this.client = options.client;
    this.tables = options.tables;
    this.clock = options.clock ?? systemClock;
    this.batchOptions = {
      maxAttempts: options.maxBatchGetAttempts ?? 6,
      wait: options.wait ?? sleep,
    };
    this.legacy = options.legacyCheckpoints === true;
    this.vault = options.vault;
    const registry = options.registry ?? defaultRegistry;
    this.topicOf = (event) => registry.get(event.event_type, event.schema_version)?.topic;
  }

  /**
   * One strongly consistent GetItem of the state item, which holds the group's checkpoints and
   * recent unsequenced ids. The inbox row is read too only when asked (`inbox.row`), and the rows
   * of the earlier layout while a stack upgrades (`legacyCheckpoints`), all in one BatchGetItem;
   * or after the state, with a second GetItem, while an id not among the recent ones may have been
   * spilled into a row (GateRecords.spilledUntil). A group that keeps the message in its row alone
   * (`inbox.rowOnly`) reads only the row.
   */
  async load(request: LoadRequest): Promise<Loaded> {
    if (request.inbox?.rowOnly) {
      const { group, eventId } = request.inbox;
      const row = (await this.getItem(this.tables.inbox, inboxKey(group, eventId))) as
        | InboxItem
        | undefined;
      const now = this.clock.now();
      return {
        inboxHit: row !== undefined && inboxRowLive(row, now),
        checkpoint: 0,
        state: undefined,
      };
    }
    const statePk = streamKey(request.state);
    const inboxPk =
      request.inbox && (request.inbox.row || this.legacy)
        ? inboxKey(request.inbox.group, request.inbox.eventId)
        : undefined;
    const checkpointPk =
      request.checkpoint && (request.checkpoint.row || this.legacy)
        ? checkpointKey(request.checkpoint.group, request.checkpoint.stream)
        : undefined;
    const rows = await this.read(statePk, [inboxPk, checkpointPk]);
    const stateRow = rows.get(`${this.tables.state}/${statePk}`) as StateItem | undefined;
    const state = stateRow ? storedStateOf(stateRow) : undefined;
    const now = this.clock.now();
    const recent = request.inbox ? state?.gate?.recent[request.inbox.eventId] : undefined;
    const recentLive = recent !== undefined && recent * 1000 > now.getTime();
    let inboxRow = rows.get(`${this.tables.inbox}/${inboxPk}`) as InboxItem | undefined;
    if (
      request.inbox &&
      inboxPk === undefined &&
      !recentLive &&
      mayHaveSpilled(state?.gate, now.getTime() / 1000)
    ) {
      const { group, eventId } = request.inbox;
      inboxRow = (await this.getItem(this.tables.inbox, inboxKey(group, eventId))) as
        | InboxItem
        | undefined;
    }
    const legacyCheckpoint = rows.get(`${this.tables.inbox}/${checkpointPk}`) as
      | CheckpointItem
      | undefined;
    const onState =
      request.checkpoint && !request.checkpoint.row
        ? checkpointOn(state?.gate, request.checkpoint.stream)
        : 0;
    return {
      inboxHit: recentLive || (inboxRow !== undefined && inboxRowLive(inboxRow, now)),
      checkpoint: Math.max(onState, legacyCheckpoint?.version ?? 0),
      state,
    };
  }

  /** The state item alone with GetItem; with inbox-table rows, one BatchGetItem. */
  private async read(
    statePk: string,
    inboxPks: readonly (string | undefined)[],
  ): Promise<Map<string, Record<string, unknown>>> {
    const rows = new Map<string, Record<string, unknown>>();
    const extra = inboxPks.filter((pk): pk is string => pk !== undefined);
    if (extra.length === 0) {
      const item = await this.getItem(this.tables.state, statePk);
      if (item) rows.set(`${this.tables.state}/${statePk}`, item);
      return rows;
    }
    const wanted = [
      { table: this.tables.state, pk: statePk },
      ...extra.map((pk) => ({ table: this.tables.inbox, pk })),
    ];
    const found = await batchGetByPk(this.client, wanted, true, this.batchOptions);
    for (const [table, items] of found)
      for (const item of items) rows.set(`${table}/${item.pk}`, item);
    return rows;
  }

  /** One item by its key, strongly consistent; undefined when absent. */
  private async getItem(table: string, pk: string): Promise<Record<string, unknown> | undefined> {
    const got = await this.client
      .send(GetItem({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true }))
      .catch((error: unknown) => {
        throw dynamoFailure(error, "GetItem");
      });
    return got.Item ? unmarshall(got.Item) : undefined;
  }

  async readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]> {
    // BETWEEN with a lower bound above the upper bound is a ValidationException: nothing to read.
    if (from > to) return [];
    const items = await queryAll(this.client, {
      TableName: this.tables.events,
      KeyConditionExpression: "#pk = :pk AND #v BETWEEN :from AND :to",
      ExpressionAttributeNames: { "#pk": EventAttr.pk, "#v": EventAttr.version },
      ExpressionAttributeValues: marshall({ ":pk": streamKey(stream), ":from": from, ":to": to }),
      ConsistentRead: true,
    });
    return items.map((item) => parseEnvelope(item as unknown as EventItem));
  }

  async commit(plain: CommitRequest): Promise<void> {
    const request = this.vault ? await this.vault.sealCommit(plain) : plain;
    const actions = commitActions(this.tables, request, this.clock.now(), this.topicOf);
    if (actions.length === 0) return;
    if (actions.length > MAX_TRANSACTION_ACTIONS) {
      throw new PermanentError(
        "dynamodb.transaction_too_large",
        `a commit may hold at most ${MAX_TRANSACTION_ACTIONS} actions, this one has ${actions.length}`,
      );
    }
    try {
      if (actions.length === 1) {
        // One action needs no transaction: PutItem and UpdateItem have the same condition and
        // ALL_OLD semantics at half the write cost. A failure maps as a transaction's would.
        await this.writeOne(actions[0] as Action, actions);
        return;
      }
      await this.client.send(
        TransactWriteItems({
          TransactItems: actions.map((a) => (a.put ? { Put: a.put } : { Update: a.update })),
        }),
      );
    } catch (error) {
      if (isNamed(error, "TransactionCanceledException")) {
        const reasons = (error as { CancellationReasons?: CancellationReason[] })
          .CancellationReasons;
        throw cancellationError(actions, reasons ?? [], error);
      }
      throw dynamoFailure(error, operationOf(actions));
    }
  }

  private async writeOne(only: Action, actions: readonly Action[]): Promise<void> {
    try {
      if (only.put) await this.client.send(PutItem(only.put));
      else await this.client.send(UpdateItem(only.update as Update));
    } catch (error) {
      if (isNamed(error, "ConditionalCheckFailedException")) {
        const item = (error as { Item?: Item }).Item;
        throw cancellationError(actions, [{ Code: "ConditionalCheckFailed", Item: item }]);
      }
      throw error;
    }
  }
}

/**
 * The DynamoDB event store with the trace reads (TraceReader) of the operator's tools, the local
 * runtime and the tests, made by the same reader as DynamoTraceReader's.
 */
export class DynamoEventStore extends DynamoConsumerStore implements TraceReader {
  private readonly trace: DynamoTraceReader;

  constructor(options: DynamoEventStoreOptions) {
    super(options);
    this.trace = new DynamoTraceReader({
      client: this.client,
      tables: this.tables,
      batchGet: this.batchOptions,
      clock: this.clock,
      ...(this.vault ? { vault: this.vault } : {}),
    });
  }

  /** The stream's events with their sealed fields opened, as an operator reads them. */
  override async readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]> {
    const envelopes = await super.readStream(stream, from, to);
    return this.vault ? this.vault.openAll(envelopes) : envelopes;
  }

  eventsByCorrelation(correlationId: string): Promise<Envelope[]> {
    return this.trace.eventsByCorrelation(correlationId);
  }

  eventsByTask(taskId: string): Promise<Envelope[]> {
    return this.trace.eventsByTask(taskId);
  }

  inboxRecords(group: string, eventIds: readonly string[]): Promise<InboxRecord[]> {
    return this.trace.inboxRecords(group, eventIds);
  }

  outcomesByCorrelation(correlationId: string): Promise<OutcomeRecord[]> {
    return this.trace.outcomesByCorrelation(correlationId);
  }

  outcomesByTask(taskId: string): Promise<OutcomeRecord[]> {
    return this.trace.outcomesByTask(taskId);
  }

  outcomesOfEvent(groups: readonly string[], eventId: string): Promise<OutcomeRecord[]> {
    return this.trace.outcomesOfEvent(groups, eventId);
  }

  correlationOfEvent(eventId: string): Promise<string | undefined> {
    return this.trace.correlationOfEvent(eventId);
  }

  groupCheckpoints(keys: readonly GroupStream[]): Promise<number[]> {
    return this.trace.groupCheckpoints(keys);
  }

  spilled(keys: readonly GroupEvent[]): Promise<boolean[]> {
    return this.trace.spilled(keys);
  }
}

function parseEnvelope(item: EventItem): Envelope {
  return envelopeOfItem(item as unknown as Record<string, unknown>);
}

function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

/** The DynamoDB operation a commit of these actions makes (for error messages). */
function operationOf(actions: readonly Action[]): string {
  if (actions.length > 1) return "TransactWriteItems";
  return actions[0]?.update ? "UpdateItem" : "PutItem";
}
