import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  ScanCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import {
  listedByTenant,
  StateAttr,
  TENANT_LISTED_KIND,
  tenantListKey,
} from "../../functions/adapters/dynamodb/tables";
import { DEFAULT_TENANT } from "../../schemas/ids";

/**
 * `agentbus lists backfill`: give the summarized state items an older version wrote the keys of
 * the operator's lists (StateIndex.byKind, StateIndex.byWaiting, StateIndex.byTenantStatus),
 * `listed_at` and, while the state waits, `waiting_since`, both taken from the item's `updated_at`
 * (the best time the item knows), and on a workflow run (listedByTenant) `tenant_list` from its
 * tenant, kind and status. Until then such items are missing from the new indexes.
 *
 * A Scan of the state table finds the items that need it; each gets one UpdateItem that sets only
 * what is missing (`if_not_exists`) and leaves `revision` alone, so a consumer's concurrent
 * conditional write still succeeds, and what it writes (its own `listed_at`) wins. An item deleted
 * or no longer summarized meanwhile, or whose `waiting`, tenant, kind or status changed (its
 * writer set the keys itself,
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
  /** The summary's kind, status and tenant, for `tenant_list` where it is missing. */
  readonly kind?: string;
  readonly status?: string;
  readonly tenant?: string;
  readonly tenantList?: string;
}

const NAMES = {
  "#pk": StateAttr.pk,
  "#kind": StateAttr.kind,
  "#updated": StateAttr.updatedAt,
  "#waiting": StateAttr.waiting,
  "#listed": StateAttr.listedAt,
  "#since": StateAttr.waitingSince,
  "#status": StateAttr.status,
  "#tenant": StateAttr.tenant,
  "#tlist": StateAttr.tenantList,
} as const;

/**
 * Summarized items without `listed_at`, runs (TENANT_LISTED_KIND) without `tenant_list`, or
 * waiting without `waiting_since`.
 */
const NEEDS_KEYS =
  "attribute_exists(#kind) AND (attribute_not_exists(#listed) OR " +
  "(#kind = :tenantListed AND attribute_not_exists(#tlist)) OR " +
  "(attribute_exists(#waiting) AND attribute_not_exists(#since)))";

const PROJECTION = "#pk, #updated, #waiting, #listed, #since, #kind, #status, #tenant, #tlist";

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
  const summary = {
    kind: text(item[StateAttr.kind]),
    status: text(item[StateAttr.status]),
    tenant: text(item[StateAttr.tenant]),
    tenantList: text(item[StateAttr.tenantList]),
  };
  return {
    ...Object.fromEntries(Object.entries(summary).filter(([, v]) => v !== undefined)),
    pk,
    ...(updatedAt !== undefined ? { updatedAt } : {}),
    ...(waiting !== undefined ? { waiting } : {}),
    ...(listedAt !== undefined ? { listedAt } : {}),
    ...(waitingSince !== undefined ? { waitingSince } : {}),
  };
}

/**
 * Set one item's missing list keys to `at` (its `updated_at`): `listed_at`, and `waiting_since`
 * when it waits, each only if absent; and on a run `tenant_list` from the summary the Scan saw. The
 * condition holds while the item exists, is summarized, (when it waits) still waits for what the
 * Scan saw and (when `tenant_list` is set) has the tenant, kind and status it saw; otherwise
 * nothing is written and the item is "skipped".
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
  const byTenant = tenantListUpdate(item);
  if (byTenant !== undefined) {
    Object.assign(names, byTenant.names);
    Object.assign(values, byTenant.values);
    update += byTenant.update;
    condition += byTenant.condition;
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

/**
 * What sets a missing `tenant_list` on a run from the summary the Scan saw, on the condition that
 * the item still has that tenant, kind and status; undefined when it has the key, is of a kind
 * listedByTenant leaves out, or has no kind or status.
 */
function tenantListUpdate(item: BackfillItem) {
  const { kind, status, tenant } = item;
  if (item.tenantList !== undefined || kind === undefined || status === undefined) return undefined;
  if (!listedByTenant(kind)) return undefined;
  const { "#kind": k, "#status": s, "#tenant": t, "#tlist": l } = NAMES;
  const values: Record<string, AttributeValue> = {
    ":tlist": { S: tenantListKey(tenant ?? DEFAULT_TENANT, kind, status) },
    ":kind": { S: kind },
    ":status": { S: status },
    ...(tenant !== undefined ? { ":tenant": { S: tenant } } : {}),
  };
  return {
    names: { "#kind": k, "#status": s, "#tenant": t, "#tlist": l },
    values,
    update: ", #tlist = if_not_exists(#tlist, :tlist)",
    condition: ` AND #kind = :kind AND #status = :status AND ${tenant === undefined ? "attribute_not_exists(#tenant)" : "#tenant = :tenant"}`,
  };
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
        ExpressionAttributeValues: { ":tenantListed": { S: TENANT_LISTED_KIND } },
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
