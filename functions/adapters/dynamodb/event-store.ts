import {
  type AttributeValue,
  type CancellationReason,
  type DynamoDBClient,
  type Put,
  PutItemCommand,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, type marshallOptions, unmarshall } from "@aws-sdk/util-dynamodb";
import type { AggregateRef, Envelope } from "../../../schemas";
import { sleep } from "../../core/batching";
import {
  type AgentBusError,
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
  OutcomeRecord,
  TraceReader,
} from "../../core/ports";
import { systemClock } from "../../core/runtime";
import { dynamoFailure } from "./failure";
import {
  type CheckpointItem,
  checkpointItem,
  type EventItem,
  eventItem,
  type InboxItem,
  inboxItem,
  inboxRowLive,
  type StateItem,
  stateItem,
  storedStateOf,
} from "./items";
import { type BatchGetOptions, batchGetByPk, queryAll } from "./reads";
import {
  CheckpointAttr,
  checkpointKey,
  EventAttr,
  InboxAttr,
  inboxKey,
  StateAttr,
  streamKey,
} from "./tables";
import { DynamoTraceReader } from "./trace-reader";

/** TransactWriteItems takes at most 100 actions. */
export const MAX_TRANSACTION_ACTIONS = 100;

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
  private readonly batchOptions: BatchGetOptions;
  /** The trace reads (TraceReader), shared with DynamoTraceReader. */
  private readonly trace: DynamoTraceReader;

  constructor(options: DynamoEventStoreOptions) {
    this.client = options.client;
    this.tables = options.tables;
    this.clock = options.clock ?? systemClock;
    this.batchOptions = {
      maxAttempts: options.maxBatchGetAttempts ?? 6,
      wait: options.wait ?? sleep,
    };
    this.trace = new DynamoTraceReader({
      client: this.client,
      tables: this.tables,
      batchGet: this.batchOptions,
    });
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

    const found = await batchGetByPk(this.client, wanted, true, this.batchOptions);
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
    const items = await queryAll(this.client, {
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

  private actions(request: CommitRequest): Action[] {
    const now = this.clock.now();
    const { tables } = this;
    return [
      ...(request.inbox ? [inboxAction(tables.inbox, request.inbox, now)] : []),
      ...(request.checkpoint ? [checkpointAction(tables.inbox, request.checkpoint)] : []),
      ...(request.state ? [stateAction(tables.state, request.state, now)] : []),
      ...(request.append ?? []).map((event) => streamAction(tables.events, event)),
    ];
  }
}

// One conditional Put per part of a commit, with the error its failed condition means. These
// conditions are hand-written because the inbox, checkpoint, state and stream writes must share
// one transaction (no library writes them together).

function inboxAction(table: string, inbox: NonNullable<CommitRequest["inbox"]>, now: Date): Action {
  return {
    part: "inbox",
    put: {
      TableName: table,
      Item: toItem(inboxItem(inbox)),
      // An expired row (TTL deletes lazily) no longer counts and may be overwritten. `<=` with
      // fractional seconds matches the in-memory twin: live while expiresAt * 1000 > now (ms).
      ConditionExpression: "attribute_not_exists(#pk) OR #ttl <= :now",
      ExpressionAttributeNames: { "#pk": InboxAttr.pk, "#ttl": InboxAttr.ttl },
      ExpressionAttributeValues: { ":now": { N: String(now.getTime() / 1000) } },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
    conflict: () => new DuplicateCommitError(),
  };
}

function checkpointAction(
  table: string,
  { group, stream, from, to }: NonNullable<CommitRequest["checkpoint"]>,
): Action {
  return {
    part: "checkpoint",
    put: {
      TableName: table,
      Item: toItem(checkpointItem(group, stream, to)),
      ...expectVersion(CheckpointAttr.version, from),
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
    conflict: (stored) =>
      new VersionConflictError(
        "checkpoint",
        `checkpoint of ${group} on ${streamKey(stream)} is ${stored?.[CheckpointAttr.version] ?? 0}, expected ${from}`,
      ),
  };
}

function stateAction(
  table: string,
  {
    aggregate,
    expectedRevision,
    next,
    version,
    dueAt,
    summary,
  }: NonNullable<CommitRequest["state"]>,
  now: Date,
): Action {
  return {
    part: "state",
    put: {
      TableName: table,
      // A Put replaces the item: without a due time, due_shard and due_at are gone with it.
      Item: toItem(stateItem(aggregate, expectedRevision + 1, version, next, now, dueAt, summary)),
      ...expectVersion(StateAttr.revision, expectedRevision),
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
    conflict: (stored) =>
      new VersionConflictError(
        "state",
        `${streamKey(aggregate)} is at revision ${stored?.[StateAttr.revision] ?? 0}, expected ${expectedRevision}`,
      ),
  };
}

function streamAction(table: string, event: NonNullable<CommitRequest["append"]>[number]): Action {
  return {
    part: "stream",
    put: {
      TableName: table,
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
  };
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
