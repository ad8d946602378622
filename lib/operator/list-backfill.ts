import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  ScanCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { StateAttr } from "../../functions/adapters/dynamodb/tables";

/**
 * `agentbus lists backfill`: give the summarized state items an older version wrote the keys of
 * the operator's lists (StateIndex.byKind, StateIndex.byWaiting), `listed_at` and, while the state
 * waits, `waiting_since`, both taken from the item's `updated_at` (the best time the item knows).
 * Until then such items are missing from the new indexes.
 *
 * A Scan of the state table finds the items that need it; each gets one UpdateItem that sets only
 * what is missing (`if_not_exists`) and leaves `revision` alone, so a consumer's concurrent
 * conditional write still succeeds, and what it writes (its own `listed_at`) wins. An item deleted
 * or no longer summarized meanwhile, or whose `waiting` changed (its writer set the keys itself,
 * or a rerun will), fails the update's condition and is skipped. Running it again updates nothing.
 */

/** How far a backfill got: items the Scan returned (those that need a key), by outcome. */
export interface ListBackfillCounts {
  readonly scanned: number;
  readonly updated: number;
  /** Deleted, no longer summarized, or waiting for something else since the Scan read them. */
  readonly skipped: number;
}

export interface ListBackfillOptions {
  /** Called after each Scan page with the counts so far. */
  readonly onProgress?: (counts: ListBackfillCounts) => Promise<void> | void;
  /** Items a Scan call reads at most (its Limit); DynamoDB's 1 MB pages without it. */
  readonly pageLimit?: number;
  /** The time an item without `updated_at` is listed at (default: when the backfill starts). */
  readonly now?: () => Date;
}

/** A state item the Scan found, as far as the backfill reads it. */
export interface BackfillItem {
  readonly pk: string;
  readonly updatedAt?: string;
  /** What the state waits for when it waits; its `waiting_since` is then missing or set. */
  readonly waiting?: string;
  readonly listedAt?: string;
  readonly waitingSince?: string;
}

const NAMES = {
  "#pk": StateAttr.pk,
  "#kind": StateAttr.kind,
  "#updated": StateAttr.updatedAt,
  "#waiting": StateAttr.waiting,
  "#listed": StateAttr.listedAt,
  "#since": StateAttr.waitingSince,
} as const;

/** Summarized items without `listed_at`, or waiting without `waiting_since`. */
const NEEDS_KEYS =
  "attribute_exists(#kind) AND (attribute_not_exists(#listed) OR " +
  "(attribute_exists(#waiting) AND attribute_not_exists(#since)))";

const PROJECTION = "#pk, #updated, #waiting, #listed, #since";

const text = (value: AttributeValue | undefined): string | undefined =>
  value?.S !== undefined ? value.S : undefined;

/** The backfill's view of a scanned item (string attributes only; others count as absent). */
export function backfillItemOf(item: Record<string, AttributeValue>): BackfillItem {
  const pk = text(item[StateAttr.pk]);
  if (pk === undefined) throw new Error("a state item without a string pk");
  const updatedAt = text(item[StateAttr.updatedAt]);
  const waiting = text(item[StateAttr.waiting]);
  const listedAt = text(item[StateAttr.listedAt]);
  const waitingSince = text(item[StateAttr.waitingSince]);
  return {
    pk,
    ...(updatedAt !== undefined ? { updatedAt } : {}),
    ...(waiting !== undefined ? { waiting } : {}),
    ...(listedAt !== undefined ? { listedAt } : {}),
    ...(waitingSince !== undefined ? { waitingSince } : {}),
  };
}

/**
 * Set one item's missing list keys to `at` (its `updated_at`): `listed_at`, and `waiting_since`
 * when it waits, each only if absent. The condition holds while the item exists, is summarized
 * and (when it waits) still waits for what the Scan saw; otherwise nothing is written and the
 * item is "skipped".
 */
export async function backfillItem(
  client: DynamoDBClient,
  table: string,
  item: BackfillItem,
  at: string,
): Promise<"updated" | "skipped"> {
  const { waiting } = item;
  const { "#pk": pk, "#kind": kind, "#listed": listed } = NAMES;
  const names: Record<string, string> = { "#pk": pk, "#kind": kind, "#listed": listed };
  const values: Record<string, AttributeValue> = { ":at": { S: at } };
  let update = "SET #listed = if_not_exists(#listed, :at)";
  let condition = "attribute_exists(#pk) AND attribute_exists(#kind)";
  if (waiting !== undefined) {
    Object.assign(names, { "#waiting": NAMES["#waiting"], "#since": NAMES["#since"] });
    values[":waiting"] = { S: waiting };
    update += ", #since = if_not_exists(#since, :at)";
    condition += " AND #waiting = :waiting";
  }
  try {
    await client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { [StateAttr.pk]: { S: item.pk } },
        UpdateExpression: update,
        ConditionExpression: condition,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
    return "updated";
  } catch (error) {
    if (isConditionFailure(error)) return "skipped";
    throw error;
  }
}

function isConditionFailure(error: unknown): boolean {
  return (
    error instanceof ConditionalCheckFailedException ||
    (error instanceof Error && error.name === "ConditionalCheckFailedException")
  );
}

/** Scan the state table for summarized items without their list keys and set them. */
export async function backfillListKeys(
  client: DynamoDBClient,
  table: string,
  options: ListBackfillOptions = {},
): Promise<ListBackfillCounts> {
  const fallback = (options.now?.() ?? new Date()).toISOString();
  let counts: ListBackfillCounts = { scanned: 0, updated: 0, skipped: 0 };
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new ScanCommand({
        TableName: table,
        FilterExpression: NEEDS_KEYS,
        ProjectionExpression: PROJECTION,
        ExpressionAttributeNames: { ...NAMES },
        ...(options.pageLimit !== undefined ? { Limit: options.pageLimit } : {}),
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const raw of page.Items ?? []) {
      const item = backfillItemOf(raw);
      const outcome = await backfillItem(client, table, item, item.updatedAt ?? fallback);
      counts = {
        scanned: counts.scanned + 1,
        updated: counts.updated + (outcome === "updated" ? 1 : 0),
        skipped: counts.skipped + (outcome === "skipped" ? 1 : 0),
      };
    }
    start = page.LastEvaluatedKey;
    await options.onProgress?.(counts);
  } while (start);
  return counts;
}
