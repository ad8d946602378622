import {
  type AttributeValue,
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  type CancellationReason,
  type DynamoDBClient,
  type KeysAndAttributes,
  type Put,
  PutItemCommand,
  paginateQuery,
  type QueryCommandInput,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, type marshallOptions, unmarshall } from "@aws-sdk/util-dynamodb";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import type { AggregateRef, Envelope } from "../../../schemas";
import { backoff, chunk, sleep } from "../../core/batching";
import {
  AgentBusError,
  DuplicateCommitError,
  PermanentError,
  TransientError,
  VersionConflictError,
} from "../../core/errors";
import type {
  Clock,
  CommitRequest,
  EventStore,
  InboxRecord,
  Loaded,
  LoadRequest,
  TraceReader,
} from "../../core/ports";
import { systemClock } from "../../core/runtime";
import { snakeCase } from "../sdk-errors";
import {
  CheckpointAttr,
  type CheckpointItem,
  checkpointItem,
  checkpointKey,
  EventAttr,
  EventIndex,
  type EventItem,
  eventItem,
  InboxAttr,
  type InboxItem,
  inboxItem,
  inboxKey,
  inboxRecordOf,
  inboxRowLive,
  StateAttr,
  type StateItem,
  stateItem,
  storedStateOf,
  streamKey,
} from "./tables";

/** TransactWriteItems takes at most 100 actions. */
export const MAX_TRANSACTION_ACTIONS = 100;
/** BatchGetItem takes at most 100 keys. */
export const MAX_BATCH_GET_KEYS = 100;

const MARSHALL: marshallOptions = { removeUndefinedValues: true };

export interface DynamoEventStoreOptions {
  /**
   * The low-level DynamoDB client, created once per container by the caller. The store marshals
   * items itself (util-dynamodb, `removeUndefinedValues`) so that the behaviour does not depend on
   * how a caller configured a DocumentClient, and so that CancellationReasons (which a
   * DocumentClient does not unmarshal) are handled in one representation.
   */
  readonly client: DynamoDBClient;
  readonly tables: { readonly state: string; readonly events: string; readonly inbox: string };
  /** Decides whether inbox rows have expired (TTL deletes lazily). */
  readonly clock?: Clock;
  /** Rounds of BatchGetItem for UnprocessedKeys before giving up with a TransientError. */
  readonly maxBatchGetAttempts?: number;
  readonly wait?: (ms: number) => Promise<void>;
}

type Part = "inbox" | "checkpoint" | "state" | "stream";
/** When several conditions fail at once, the first part in this order is reported. */
const PRECEDENCE: readonly Part[] = ["inbox", "checkpoint", "state", "stream"];

interface Action {
  readonly part: Part;
  readonly put: Put;
  /** The error to raise when this action's condition fails, given the stored item (ALL_OLD). */
  readonly conflict: (stored: Record<string, unknown> | undefined) => AgentBusError;
}

type Item = Record<string, AttributeValue>;

/**
 * The event store on DynamoDB: state, events (event store + outbox) and inbox tables.
 * Behaves exactly like InMemoryEventStore (functions/core/memory.ts); the shared contract test in
 * test/adapters runs the same cases against both.
 *
 * `commit` is hand-written rather than delegated to a mapper library because the inbox row, the
 * checkpoint, the state item and the appended events must share ONE TransactWriteItems (and its
 * CancellationReasons must be mapped back to the port's errors by item index).
 */
export class DynamoEventStore implements EventStore, TraceReader {
  private readonly client: DynamoDBClient;
  private readonly tables: DynamoEventStoreOptions["tables"];
  private readonly clock: Clock;
  private readonly maxBatchGetAttempts: number;
  private readonly wait: (ms: number) => Promise<void>;

  constructor(options: DynamoEventStoreOptions) {
    this.client = options.client;
    this.tables = options.tables;
    this.clock = options.clock ?? systemClock;
    this.maxBatchGetAttempts = options.maxBatchGetAttempts ?? 6;
    this.wait = options.wait ?? sleep;
  }

  /** One consistent BatchGetItem for the inbox row, checkpoint row and state item asked for. */
  async load(request: LoadRequest): Promise<Loaded> {
    const wanted: { table: string; pk: string }[] = [
      { table: this.tables.state, pk: streamKey(request.state) },
    ];
    const inboxPk = request.inbox
      ? inboxKey(request.inbox.group, request.inbox.eventId)
      : undefined;
    const checkpointPk = request.checkpoint
      ? checkpointKey(request.checkpoint.group, request.checkpoint.stream)
      : undefined;
    if (inboxPk) wanted.push({ table: this.tables.inbox, pk: inboxPk });
    if (checkpointPk) wanted.push({ table: this.tables.inbox, pk: checkpointPk });

    const found = await this.batchGet(wanted, true);
    const byKey = (table: string, pk: string) => found.get(table)?.find((item) => item.pk === pk);

    const inboxRow = inboxPk
      ? (byKey(this.tables.inbox, inboxPk) as InboxItem | undefined)
      : undefined;
    const checkpointRow = checkpointPk
      ? (byKey(this.tables.inbox, checkpointPk) as CheckpointItem | undefined)
      : undefined;
    const stateRow = byKey(this.tables.state, streamKey(request.state)) as StateItem | undefined;
    return {
      inboxHit: inboxRow !== undefined && inboxRowLive(inboxRow, this.clock.now()),
      checkpoint: checkpointRow?.version ?? 0,
      state: stateRow ? storedStateOf(stateRow) : undefined,
    };
  }

  async readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]> {
    // BETWEEN with a lower bound above the upper bound is a ValidationException: nothing to read.
    if (from > to) return [];
    const items = await this.query({
      TableName: this.tables.events,
      KeyConditionExpression: "#pk = :pk AND #v BETWEEN :from AND :to",
      ExpressionAttributeNames: { "#pk": EventAttr.pk, "#v": EventAttr.version },
      ExpressionAttributeValues: marshall({ ":pk": streamKey(stream), ":from": from, ":to": to }),
      ConsistentRead: true,
    });
    return items.map((item) => parseEnvelope(item as unknown as EventItem));
  }

  async commit(request: CommitRequest): Promise<void> {
    const actions = this.actions(request);
    if (actions.length === 0) return;
    if (actions.length > MAX_TRANSACTION_ACTIONS) {
      throw new PermanentError(
        "dynamodb.transaction_too_large",
        `a commit may hold at most ${MAX_TRANSACTION_ACTIONS} actions, this one has ${actions.length}`,
      );
    }
    try {
      if (actions.length === 1) {
        // One action needs no transaction: PutItem has the same condition and ALL_OLD semantics
        // at half the write cost. Its failure is mapped through the same code as a transaction's.
        const [only] = actions as [Action];
        try {
          await this.client.send(new PutItemCommand(only.put));
        } catch (error) {
          if (isNamed(error, "ConditionalCheckFailedException")) {
            const item = (error as { Item?: Item }).Item;
            throw cancellationError(actions, [{ Code: "ConditionalCheckFailed", Item: item }]);
          }
          throw error;
        }
        return;
      }
      await this.client.send(
        new TransactWriteItemsCommand({ TransactItems: actions.map((a) => ({ Put: a.put })) }),
      );
    } catch (error) {
      if (isNamed(error, "TransactionCanceledException")) {
        const reasons = (error as { CancellationReasons?: CancellationReason[] })
          .CancellationReasons;
        throw cancellationError(actions, reasons ?? [], error);
      }
      throw dynamoFailure(error, actions.length === 1 ? "PutItem" : "TransactWriteItems");
    }
  }

  async eventsByCorrelation(correlationId: string): Promise<Envelope[]> {
    return this.eventsByIndex(EventIndex.byCorrelation, EventAttr.correlationId, correlationId);
  }

  /** Every event of one task, in event id order (the by-task GSI). */
  async eventsByTask(taskId: string): Promise<Envelope[]> {
    return this.eventsByIndex(EventIndex.byTask, EventAttr.taskId, taskId);
  }

  /**
   * Inbox rows of one group, in the order of `eventIds` (unknown ids left out). Like the in-memory
   * twin it returns expired rows too: this is the tracing view of what was recorded.
   */
  async inboxRecords(group: string, eventIds: readonly string[]): Promise<InboxRecord[]> {
    const unique = [...new Set(eventIds)];
    const rows = new Map<string, InboxRecord>();
    for (const ids of chunk(unique, () => 1, MAX_BATCH_GET_KEYS, Number.POSITIVE_INFINITY)) {
      const found = await this.batchGet(
        ids.map((id) => ({ table: this.tables.inbox, pk: inboxKey(group, id) })),
        false,
      );
      for (const item of found.get(this.tables.inbox) ?? []) {
        const record = inboxRecordOf(item as unknown as InboxItem);
        rows.set(record.eventId, record);
      }
    }
    return eventIds.flatMap((id) => {
      const row = rows.get(id);
      return row ? [row] : [];
    });
  }

  private actions(request: CommitRequest): Action[] {
    const now = this.clock.now();
    const actions: Action[] = [];
    if (request.inbox) {
      actions.push({
        part: "inbox",
        put: {
          TableName: this.tables.inbox,
          Item: toItem(inboxItem(request.inbox)),
          // An expired row (TTL deletes lazily) no longer counts and may be overwritten. `<=` with
          // fractional seconds matches the in-memory twin: live while expiresAt * 1000 > now (ms).
          ConditionExpression: "attribute_not_exists(#pk) OR #ttl <= :now",
          ExpressionAttributeNames: { "#pk": InboxAttr.pk, "#ttl": InboxAttr.ttl },
          ExpressionAttributeValues: { ":now": { N: String(now.getTime() / 1000) } },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
        conflict: () => new DuplicateCommitError(),
      });
    }
    if (request.checkpoint) {
      const { group, stream, from, to } = request.checkpoint;
      actions.push({
        part: "checkpoint",
        put: {
          TableName: this.tables.inbox,
          Item: toItem(checkpointItem(group, stream, to)),
          ...expectVersion(CheckpointAttr.version, from),
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
        conflict: (stored) =>
          new VersionConflictError(
            "checkpoint",
            `checkpoint of ${group} on ${streamKey(stream)} is ${stored?.[CheckpointAttr.version] ?? 0}, expected ${from}`,
          ),
      });
    }
    if (request.state) {
      const { aggregate, expectedRevision, next, version, dueAt } = request.state;
      actions.push({
        part: "state",
        put: {
          TableName: this.tables.state,
          // A Put replaces the item: without a due time, due_shard and due_at are gone with it.
          Item: toItem(stateItem(aggregate, expectedRevision + 1, version, next, now, dueAt)),
          ...expectVersion(StateAttr.revision, expectedRevision),
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
        conflict: (stored) =>
          new VersionConflictError(
            "state",
            `${streamKey(aggregate)} is at revision ${stored?.[StateAttr.revision] ?? 0}, expected ${expectedRevision}`,
          ),
      });
    }
    for (const event of request.append ?? []) {
      actions.push({
        part: "stream",
        put: {
          TableName: this.tables.events,
          Item: toItem(eventItem(event)),
          ConditionExpression: "attribute_not_exists(#pk)",
          ExpressionAttributeNames: { "#pk": EventAttr.pk },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        },
        conflict: () =>
          new VersionConflictError(
            "stream",
            `${streamKey(event.aggregate)} already has version ${event.aggregate.version}`,
          ),
      });
    }
    return actions;
  }

  private async eventsByIndex(index: string, attribute: string, value: string) {
    const items = await this.query({
      TableName: this.tables.events,
      IndexName: index,
      KeyConditionExpression: "#k = :k",
      ExpressionAttributeNames: { "#k": attribute },
      ExpressionAttributeValues: { ":k": { S: value } },
    });
    return items
      .map((item) => parseEnvelope(item as unknown as EventItem))
      .sort((a, b) => (a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0));
  }

  /** Every page of a Query (the SDK paginator follows LastEvaluatedKey), unmarshalled. */
  private async query(input: QueryCommandInput): Promise<Record<string, unknown>[]> {
    const items: Record<string, unknown>[] = [];
    try {
      for await (const page of paginateQuery({ client: this.client }, input)) {
        for (const item of page.Items ?? []) items.push(unmarshall(item));
      }
    } catch (error) {
      throw dynamoFailure(error, "Query");
    }
    return items;
  }

  /**
   * One BatchGetItem for keys across tables (at most 100), retrying UnprocessedKeys with jittered
   * backoff, as AWS asks: BatchGetItem may return part of the result under load.
   */
  private async batchGet(
    keys: readonly { table: string; pk: string }[],
    consistent: boolean,
  ): Promise<Map<string, Record<string, unknown>[]>> {
    const found = new Map<string, Record<string, unknown>[]>();
    let pending: Record<string, KeysAndAttributes> = {};
    for (const { table, pk } of keys) {
      const entry = pending[table] ?? { Keys: [], ConsistentRead: consistent };
      entry.Keys?.push({ pk: { S: pk } });
      pending[table] = entry;
    }
    for (let attempt = 1; Object.keys(pending).length > 0; attempt++) {
      let output: BatchGetItemCommandOutput;
      try {
        output = await this.client.send(new BatchGetItemCommand({ RequestItems: pending }));
      } catch (error) {
        throw dynamoFailure(error, "BatchGetItem");
      }
      for (const [table, items] of Object.entries(output.Responses ?? {})) {
        const list = found.get(table) ?? [];
        for (const item of items) list.push(unmarshall(item));
        found.set(table, list);
      }
      const unprocessed: Record<string, KeysAndAttributes> = {};
      for (const [table, entry] of Object.entries(output.UnprocessedKeys ?? {})) {
        if (entry.Keys && entry.Keys.length > 0)
          unprocessed[table] = { Keys: entry.Keys, ConsistentRead: consistent };
      }
      pending = unprocessed;
      if (Object.keys(pending).length === 0) break;
      if (attempt >= this.maxBatchGetAttempts) {
        throw new TransientError(
          "dynamodb.unprocessed_keys",
          `BatchGetItem left keys unprocessed after ${attempt} attempts`,
        );
      }
      await this.wait(backoff(attempt));
    }
    return found;
  }
}

function toItem(value: object): Item {
  try {
    return marshall(value, MARSHALL);
  } catch (error) {
    throw new PermanentError(
      "dynamodb.invalid_item",
      `cannot store this value in DynamoDB: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}

/** `attribute_not_exists(pk)` when nothing may be stored yet, else `<attribute> = :expected`. */
function expectVersion(attribute: string, expected: number): Partial<Put> {
  return expected === 0
    ? {
        ConditionExpression: "attribute_not_exists(#pk)",
        ExpressionAttributeNames: { "#pk": "pk" },
      }
    : {
        ConditionExpression: "#v = :expected",
        ExpressionAttributeNames: { "#v": attribute },
        ExpressionAttributeValues: { ":expected": { N: String(expected) } },
      };
}

function parseEnvelope(item: EventItem): Envelope {
  return JSON.parse(item.envelope) as Envelope;
}

function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

/**
 * Map the reasons of a cancelled commit (by item index) to the port's errors. Failed conditions
 * win over everything else, in the order duplicate, checkpoint, state, stream.
 */
function cancellationError(
  actions: readonly Action[],
  reasons: readonly CancellationReason[],
  cause?: unknown,
): AgentBusError {
  for (const part of PRECEDENCE) {
    const index = actions.findIndex(
      (action, i) => action.part === part && reasons[i]?.Code === "ConditionalCheckFailed",
    );
    const action = actions[index];
    if (action) {
      const stored = reasons[index]?.Item;
      return action.conflict(stored ? unmarshall(stored) : undefined);
    }
  }
  const codes = new Set(reasons.map((r) => r.Code ?? "None"));
  const summary = reasons.map((r) => r.Code ?? "None").join(", ");
  const message = `commit cancelled: [${summary}]`;
  if (codes.has("ValidationError")) {
    const detail = reasons.find((r) => r.Code === "ValidationError")?.Message ?? "";
    return new PermanentError("dynamodb.validation", `${message} ${detail}`.trim(), { cause });
  }
  if (codes.has("ItemCollectionSizeLimitExceeded"))
    return new PermanentError("dynamodb.item_collection_too_large", message, { cause });
  if (codes.has("TransactionConflict"))
    return new TransientError("dynamodb.transaction_conflict", message, { cause });
  if (codes.has("ThrottlingError") || codes.has("ProvisionedThroughputExceeded"))
    return new TransientError("dynamodb.throttled", message, { cause });
  return new TransientError("dynamodb.transaction_cancelled", message, { cause });
}

type SdkErrorLike = Parameters<typeof isThrottlingError>[0];

/** Map an SDK error from a whole call to the error classes the pipeline acts on. */
export function dynamoFailure(error: unknown, operation: string): AgentBusError {
  if (error instanceof AgentBusError) return error;
  const e = error as SdkErrorLike & { $fault?: string };
  const name = error instanceof Error ? error.name : "Error";
  const message = `DynamoDB ${operation} failed: ${error instanceof Error ? error.message : String(error)}`;
  if (name === "TransactionConflictException")
    return new TransientError("dynamodb.transaction_conflict", message, { cause: error });
  if (isThrottlingError(e))
    return new TransientError("dynamodb.throttled", message, { cause: error });
  if (name === "ValidationException")
    return new PermanentError("dynamodb.validation", message, { cause: error });
  if (isTransientError(e) || isServerError(e) || e.$fault !== "client")
    return new TransientError("dynamodb.unavailable", message, { cause: error });
  return new PermanentError(`dynamodb.${snakeCase(name)}`, message, { cause: error });
}
