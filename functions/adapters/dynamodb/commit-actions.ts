import type { AttributeValue, CancellationReason, Put, Update } from "@aws-sdk/client-dynamodb";
import { marshall, type marshallOptions, unmarshall } from "@aws-sdk/util-dynamodb";
import type { AggregateRef, Envelope, Topic } from "../../../schemas";
import { storedStreamHead } from "../../core/commit";
import {
  type AgentBusError,
  DuplicateCommitError,
  PermanentError,
  TransientError,
  VersionConflictError,
} from "../../core/errors";
import { listingAfter } from "../../core/listing";
import type { CommitRequest, StreamHead } from "../../core/ports";
import { checkpointItem, eventItem, inboxItem, stateItem, storedGate } from "./items";
import {
  CheckpointAttr,
  EventAttr,
  InboxAttr,
  inboxKey,
  isTaskRoot,
  StateAttr,
  startsRun,
  streamKey,
  streamPredecessors,
} from "./tables";

/**
 * The writes of a commit (./event-store), one conditional action per part, each with the error
 * its failed condition means, and the mapping of a cancelled commit's reasons back to those
 * errors. Hand-written because the inbox row, the checkpoint row, the state item and the stream
 * events must share one transaction (no library writes them together).
 */

const MARSHALL: marshallOptions = { removeUndefinedValues: true };

type Part = "inbox" | "checkpoint" | "state" | "stream" | "spill";
/** When several conditions fail at once, the first part in this order is reported. */
const PRECEDENCE: readonly Part[] = ["inbox", "checkpoint", "state", "stream"];

export interface Action {
  readonly part: Part;
  /** One of the two: the conditional write of this part. */
  readonly put?: Put;
  readonly update?: Update;
  /** The error to raise when this action's condition fails, given the stored item (ALL_OLD). */
  readonly conflict: (stored: Record<string, unknown> | undefined) => AgentBusError;
}

export type Item = Record<string, AttributeValue>;

/**
 * The topic an appended event is published on, as the committing function's registry defines its
 * type (EventAttr.topic); undefined for a type it does not know.
 */
export type TopicOf = (event: Envelope) => Topic | undefined;

/** The actions of a commit, in the order of its parts. */
export function commitActions(
  tables: { readonly state: string; readonly events: string; readonly inbox: string },
  request: CommitRequest,
  now: Date,
  topicOf: TopicOf,
): Action[] {
  const append = request.append ?? [];
  const previous = streamPredecessors(append, streamHeadBefore(request));
  return [
    ...(request.inbox && !request.recordedByState
      ? [inboxAction(tables.inbox, request.inbox, now)]
      : []),
    ...(request.checkpoint ? [checkpointAction(tables.inbox, request.checkpoint)] : []),
    ...(request.state
      ? [stateAction(tables.state, request.state, now, storedStreamHead(request))]
      : []),
    ...(request.gate ? [gateAction(tables.state, request.gate, now)] : []),
    ...append.map((event, index) =>
      streamAction(tables.events, event, request.inbox, previous[index], topicOf(event)),
    ),
    ...(request.spill?.ids ?? []).map((id) =>
      spillAction(tables.inbox, request.spill?.group ?? "", id),
    ),
  ];
}

/**
 * The row of an id spilled from a state's recent ones: without a condition (the state's own
 * condition guards the commit), keeping the outcome a row of the id already records.
 */
function spillAction(
  table: string,
  group: string,
  { eventId, expiresAt }: NonNullable<CommitRequest["spill"]>["ids"][number],
): Action {
  return {
    part: "spill",
    update: {
      TableName: table,
      Key: { [InboxAttr.pk]: { S: inboxKey(group, eventId) } },
      UpdateExpression: "SET #g = :g, #e = :e, #s = :s, #ttl = :ttl",
      ExpressionAttributeNames: {
        "#g": InboxAttr.group,
        "#e": InboxAttr.eventId,
        "#s": InboxAttr.spilled,
        "#ttl": InboxAttr.ttl,
      },
      ExpressionAttributeValues: toItem({
        ":g": group,
        ":e": eventId,
        ":s": true,
        ":ttl": expiresAt,
      }),
    },
    conflict: () => new TransientError("dynamodb.spill", `the spilled row of ${eventId} failed`),
  };
}

function inboxAction(table: string, inbox: NonNullable<CommitRequest["inbox"]>, now: Date): Action {
  // An expired row (TTL deletes lazily) no longer counts and may be overwritten. `<=` with
  // fractional seconds matches the in-memory twin: live while expiresAt * 1000 > now (ms).
  const condition: Condition = {
    ConditionExpression: "attribute_not_exists(#pk) OR #ttl <= :now",
    ExpressionAttributeNames: { "#pk": InboxAttr.pk, "#ttl": InboxAttr.ttl },
    ExpressionAttributeValues: { ":now": { N: String(now.getTime() / 1000) } },
  };
  return putAction("inbox", table, inboxItem(inbox), condition, () => new DuplicateCommitError());
}

function checkpointAction(
  table: string,
  { group, stream, from, to }: NonNullable<CommitRequest["checkpoint"]>,
): Action {
  const item = checkpointItem(group, stream, to);
  return putAction(
    "checkpoint",
    table,
    item,
    expectVersion(CheckpointAttr.version, from),
    (stored) =>
      new VersionConflictError(
        "checkpoint",
        `checkpoint of ${group} on ${streamKey(stream)} is ${stored?.[CheckpointAttr.version] ?? 0}, expected ${from}`,
      ),
  );
}

/** The carried stream head, when the state is the aggregate whose stream the commit appends to. */
function streamHeadBefore(request: CommitRequest) {
  const first = request.append?.[0];
  const state = request.state;
  if (!first || !state || streamKey(state.aggregate) !== streamKey(first.aggregate))
    return undefined;
  return state.streamHead;
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
    listing,
    gate,
    compact,
  }: NonNullable<CommitRequest["state"]>,
  now: Date,
  streamHead: StreamHead | undefined,
): Action {
  // A Put replaces the item: without a due time, due_shard and due_at are gone with it. A summary
  // comes with its list keys (../../core/commit); a request without them, or with keys that do
  // not match its summary, is listed as of now.
  const listed = summary && { summary, listing: listingAfter(listing, summary, now) };
  const item = stateItem(aggregate, expectedRevision + 1, version, next, now, dueAt, listed, gate, {
    compact,
    streamHead,
  });
  return putAction(
    "state",
    table,
    item,
    expectVersion(StateAttr.revision, expectedRevision),
    stateConflict(aggregate, expectedRevision),
  );
}

/**
 * The gate records and the revision, the rest of the item kept (created bare when absent):
 * an event that changes no state still costs one conditional write of one item. `updated_at`
 * stays when the state changed last: the operator lists' index, sorted by it, is not moved.
 */
function gateAction(
  table: string,
  { aggregate, expectedRevision, records, expiresAt }: NonNullable<CommitRequest["gate"]>,
  now: Date,
): Action {
  const condition = expectVersion(StateAttr.revision, expectedRevision);
  const sets = [
    "#rev = :rev",
    "#ver = if_not_exists(#ver, :zero)",
    "#at = :at",
    "#ai = :ai",
    "#up = if_not_exists(#up, :up)",
  ];
  const removes: string[] = [];
  const values: Record<string, unknown> = {
    ":rev": expectedRevision + 1,
    ":zero": 0,
    ":at": aggregate.type,
    ":ai": aggregate.id,
    ":up": now.toISOString(),
  };
  setGateRecords(records, { sets, removes, values });
  if (records.spilledUntil !== undefined) {
    sets.push("#su = :su");
    values[":su"] = records.spilledUntil;
  }
  // An item of unsequenced ids alone expires with them; one that holds more never does.
  if (expiresAt !== undefined) {
    sets.push("#ttl = :ttl");
    values[":ttl"] = expiresAt;
  } else removes.push("#ttl");
  return {
    part: "state",
    update: {
      TableName: table,
      Key: { [StateAttr.pk]: { S: streamKey(aggregate) } },
      UpdateExpression: `SET ${sets.join(", ")} REMOVE ${removes.join(", ")}`,
      ConditionExpression: condition.ConditionExpression,
      ExpressionAttributeNames: {
        ...condition.ExpressionAttributeNames,
        "#rev": StateAttr.revision,
        "#ver": StateAttr.version,
        "#at": StateAttr.aggType,
        "#ai": StateAttr.aggId,
        "#up": StateAttr.updatedAt,
        "#cp": StateAttr.checkpoints,
        "#rc": StateAttr.recent,
        "#gz": StateAttr.gateDeflated,
        "#ttl": StateAttr.ttl,
        ...(records.spilledUntil !== undefined ? { "#su": StateAttr.spilledUntil } : {}),
      },
      ExpressionAttributeValues: { ...condition.ExpressionAttributeValues, ...toItem(values) },
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
    conflict: stateConflict(aggregate, expectedRevision),
  };
}

/**
 * The checkpoints and recent ids as the state's Put would store them (items storedGate): the
 * maps `#cp` and `#rc`, or the deflated `#gz`, the other form removed.
 */
function setGateRecords(
  records: NonNullable<CommitRequest["gate"]>["records"],
  update: { sets: string[]; removes: string[]; values: Record<string, unknown> },
): void {
  const { sets, removes, values } = update;
  const stored = storedGate(records);
  if (stored.gate_z) {
    sets.push("#gz = :gz");
    values[":gz"] = stored.gate_z;
    removes.push("#cp", "#rc");
  } else {
    sets.push("#cp = :cp", "#rc = :rc");
    values[":cp"] = stored.gate_checkpoints;
    values[":rc"] = stored.gate_recent;
    removes.push("#gz");
  }
}

function stateConflict(aggregate: AggregateRef, expectedRevision: number): Action["conflict"] {
  return (stored) =>
    new VersionConflictError(
      "state",
      `${streamKey(aggregate)} is at revision ${stored?.[StateAttr.revision] ?? 0}, expected ${expectedRevision}`,
    );
}

/**
 * The Put of an appended event; `cause`, the inbox record of the event the commit handled;
 * `previous`, the event before it in its stream when known (./tables streamPredecessors); `topic`,
 * its bus (EventAttr.topic).
 */
function streamAction(
  table: string,
  event: NonNullable<CommitRequest["append"]>[number],
  cause: CommitRequest["inbox"],
  previous: StreamHead | undefined,
  topic: Topic | undefined,
): Action {
  const root = isTaskRoot(event.task_id, event.correlation_id, cause, previous);
  return putAction(
    "stream",
    table,
    eventItem(event, root, startsRun(event, previous), topic),
    absent(EventAttr.pk),
    () =>
      new VersionConflictError(
        "stream",
        `${streamKey(event.aggregate)} already has version ${event.aggregate.version}`,
      ),
  );
}

/**
 * A conditional Put of one part. ALL_OLD returns the stored item with a failed condition, for
 * `conflict` to say what was there.
 */
function putAction(
  part: Part,
  table: string,
  item: object,
  condition: Condition,
  conflict: Action["conflict"],
): Action {
  return {
    part,
    put: {
      TableName: table,
      Item: toItem(item),
      ...condition,
      ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    },
    conflict,
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

type Condition = Pick<
  Put,
  "ConditionExpression" | "ExpressionAttributeNames" | "ExpressionAttributeValues"
>;

/** No item with this key is stored yet. */
function absent(partitionKey: string): Condition {
  return {
    ConditionExpression: "attribute_not_exists(#pk)",
    ExpressionAttributeNames: { "#pk": partitionKey },
  };
}

/** `attribute_not_exists(pk)` when nothing may be stored yet, else `<attribute> = :expected`. */
function expectVersion(attribute: string, expected: number): Condition {
  return expected === 0
    ? absent("pk")
    : {
        ConditionExpression: "#v = :expected",
        ExpressionAttributeNames: { "#v": attribute },
        ExpressionAttributeValues: { ":expected": { N: String(expected) } },
      };
}

/**
 * Map the reasons of a cancelled commit (by item index) to the port's errors. Failed conditions
 * win over everything else, in the order duplicate, checkpoint, state, stream.
 */
export function cancellationError(
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
