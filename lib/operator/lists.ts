import { type AttributeValue, QueryCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { envelopeOfItem } from "../../functions/adapters/dynamodb/deflated-json";
import { batchGetItems, missingIndex } from "../../functions/adapters/dynamodb/reads";
import {
  EventAttr,
  EventIndex,
  LegacyStateIndex,
  LegacyTraceIndex,
  listedByTenant,
  SideEffectAttr,
  SideEffectIndex,
  STATE_SUMMARY_ATTRIBUTES,
  StateAttr,
  StateIndex,
  tenantListKey,
} from "../../functions/adapters/dynamodb/tables";
import { DEFAULT_TENANT, TenantId, tenantOf } from "../../schemas/ids";
import { fromSdk } from "./from-sdk";
import type { OpsStack } from "./stack";
import type { ItemSummary, ListFilter, SideEffectView } from "./views";

export type { ListFilter };

/** A summarized state in the operator's lists: its summary, tenant and list keys. */
export interface SummaryRow extends ItemSummary {
  readonly tenant: string;
  readonly waiting?: string;
  readonly counts: Readonly<Record<string, number>>;
}

const KINDS: Readonly<Record<string, ItemSummary["kind"]>> = {
  run: "run",
  conversation: "conversation",
  task: "task",
};

/** What a list reads of each state item: its summary and list keys, not its data. */
const SUMMARY_ATTRIBUTES = [
  StateAttr.pk,
  ...STATE_SUMMARY_ATTRIBUTES,
  StateAttr.tenant,
  StateAttr.updatedAt,
  StateAttr.listedAt,
  StateAttr.waitingSince,
  StateAttr.tenantList,
];

/**
 * How many of a list's newest entries a filtered list looks through at most where no index is
 * partitioned by its filter (one tenant of a wait list, a status without a tenant): the other
 * entries are read and left out.
 */
export const LOOKBACK = 5000;

const text = (value: unknown) => (typeof value === "string" ? value : undefined);

function rowOf(item: Record<string, unknown>): SummaryRow {
  const kind = String(item[StateAttr.kind]);
  const optional = {
    label: text(item[StateAttr.label]),
    waiting: text(item[StateAttr.waiting]),
    listedAt: text(item[StateAttr.listedAt]),
    waitingSince: text(item[StateAttr.waitingSince]),
  };
  return {
    kind: KINDS[kind] ?? "task",
    id: String(item[StateAttr.aggId]),
    status: String(item[StateAttr.status]),
    updatedAt: String(item[StateAttr.updatedAt]),
    // A state whose role records no tenant, or from before tenants, is the default tenant's.
    tenant: text(item[StateAttr.tenant]) ?? DEFAULT_TENANT,
    ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)),
    counts: (item[StateAttr.counts] as Record<string, number> | undefined) ?? {},
  };
}

type ListedBy = { readonly kind: string } | { readonly waiting: string };

/** A list filter as it is given (the CLI's options, the console's query), before it is checked. */
export interface ListFilterText {
  readonly tenant?: string | undefined;
  readonly status?: string | undefined;
  readonly since?: string | undefined;
  readonly before?: string | undefined;
}

/** A list filter that cannot be used; the message names the field as its giver named it. */
export class ListFilterError extends Error {
  override readonly name = "ListFilterError";
}

/** A page to continue from that is not one a list gave (its `next`). */
export class ListPageError extends Error {
  override readonly name = "ListPageError";
}

const STATUS = /^[A-Za-z0-9_.-]{1,64}$/;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * The filter `given` names, every field checked before anything is read: a tenant id, a status
 * (1-64 of A-Z a-z 0-9 _ . -), times as ISO 8601 dates or times with Z or an offset (held as
 * `listed_at` holds them: UTC, milliseconds), `since` before `before`. Empty fields are absent.
 * `nameOf` names a field in the error (`--status` for the CLI); a ListFilterError says what is wrong.
 */
export function checkedListFilter(
  given: ListFilterText,
  nameOf: (field: keyof ListFilterText) => string = (field) => field,
): ListFilter {
  const value = (field: keyof ListFilterText) => {
    const raw = given[field]?.trim();
    return raw === undefined || raw === "" ? undefined : raw;
  };
  const refuse = (field: keyof ListFilterText, why: string): never => {
    throw new ListFilterError(`${nameOf(field)} ${JSON.stringify(value(field))}: ${why}`);
  };
  const tenant = value("tenant");
  if (tenant !== undefined) {
    const parsed = TenantId.safeParse(tenant);
    if (!parsed.success) refuse("tenant", parsed.error.issues[0]?.message ?? "not a tenant id");
  }
  const status = value("status");
  if (status !== undefined && !STATUS.test(status)) refuse("status", "1-64 of A-Z a-z 0-9 _ . -");
  const time = (field: "since" | "before") => {
    const raw = value(field);
    if (raw === undefined) return undefined;
    const at = new Date(raw);
    if (!ISO_TIME.test(raw) || Number.isNaN(at.getTime()))
      refuse(field, "an ISO 8601 date or time with Z or an offset");
    return at.toISOString();
  };
  const filter = { tenant, status, since: time("since"), before: time("before") };
  if (filter.since !== undefined && filter.before !== undefined && filter.since >= filter.before)
    throw new ListFilterError(`${nameOf("since")} must be before ${nameOf("before")}`);
  return Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== undefined));
}

/** One page of a list, and where the next starts (absent on the last page). */
export interface SummaryPage {
  readonly rows: SummaryRow[];
  readonly next?: string;
}

/** Which list to read: the index, its partition, and what the items must still be. */
interface ListQuery {
  readonly index: string;
  readonly legacy?: string;
  readonly attribute: string;
  readonly value: string;
  /** The index's sort key, the one a page is ordered by and `since`/`before` bound. */
  readonly sortedBy: string;
  readonly filter: ListFilter;
  /** Whether the partition is the filter itself (no entry of another tenant or status is read). */
  readonly exact: boolean;
}

/**
 * The list of `by` filtered by `filter`: by tenant and status where `byTenant`, if it can (runs
 * filtered by both).
 */
function queryOf(by: ListedBy, filter: ListFilter, byTenant = true): ListQuery {
  if ("waiting" in by)
    return {
      index: StateIndex.byWaiting,
      legacy: LegacyStateIndex.byWaiting,
      attribute: StateAttr.waiting,
      value: by.waiting,
      sortedBy: StateAttr.waitingSince,
      filter,
      exact: filter.tenant === undefined && filter.status === undefined,
    };
  if (
    byTenant &&
    listedByTenant(by.kind) &&
    filter.tenant !== undefined &&
    filter.status !== undefined
  )
    return {
      index: StateIndex.byTenantStatus,
      attribute: StateAttr.tenantList,
      value: tenantListKey(filter.tenant, by.kind, filter.status),
      sortedBy: StateAttr.listedAt,
      filter,
      exact: true,
    };
  return {
    index: StateIndex.byKind,
    legacy: LegacyStateIndex.byKind,
    attribute: StateAttr.kind,
    value: by.kind,
    sortedBy: StateAttr.listedAt,
    filter,
    exact: filter.tenant === undefined && filter.status === undefined,
  };
}

/**
 * The newest summarized states of one kind (by when they were first summarized) or waiting for
 * one thing (by since when), at most `limit`, filtered as `filter` says (see summaryPage).
 */
export async function summaries(
  stack: OpsStack,
  by: ListedBy,
  limit = 50,
  filter: ListFilter = {},
): Promise<SummaryRow[]> {
  return (await summaryPage(stack, by, { limit, filter })).rows;
}

/** Which page of a list: how many states, filtered how, after which page. */
export interface PageOptions {
  readonly limit?: number;
  readonly filter?: ListFilter;
  /** The `next` of the page before. */
  readonly after?: string | undefined;
  /**
   * Read the kind's list and leave the other tenants and statuses out even where by-tenant-status
   * has the list: what a stack without it does (the bench compares the two).
   */
  readonly lookThrough?: boolean;
}

/**
 * A page of a list, newest first: at most `limit` states, after the page `after` ended (its
 * `next`). The list indexes keep keys only, so that a state's writes leave them alone: the
 * summaries are read from the items (BatchGetItem), and a state that has left the list since the
 * index saw it (another status, no longer waiting) is left out.
 *
 * One tenant's runs of one status are one Query of by-tenant-status per page (only runs are in it:
 * listedByTenant). Any other filter by tenant or status, of runs or of another kind, reads the
 * kind's (or the wait's) list and leaves the others out, looking through at most LOOKBACK entries. A stack still upgrading (`agentbus:listIndexUpgrade`)
 * may not have the new indexes yet: by-tenant-status's list is then read from by-kind-listed, and
 * by-kind-listed's from the legacy index.
 */
export async function summaryPage(
  stack: OpsStack,
  by: ListedBy,
  options: PageOptions = {},
): Promise<SummaryPage> {
  const { limit = 50, filter = {} } = options;
  const after = options.after === undefined ? undefined : cursorOf(options.after);
  let query = queryOf(by, filter, options.lookThrough !== true);
  // A page continues the list its cursor names: the index the first page read.
  while (after !== undefined && query.index !== after.index) {
    const earlier = fallbackOf(by, query);
    if (earlier === undefined)
      throw new ListPageError("the page to continue from is of another list");
    query = earlier;
  }
  for (;;) {
    try {
      return await listed(stack, query, limit, after?.key);
    } catch (error) {
      const earlier: ListQuery | undefined =
        after === undefined && missingIndex(error) ? fallbackOf(by, query) : undefined;
      if (earlier === undefined) throw error;
      query = earlier;
    }
  }
}

/** The list one index earlier in the list-index upgrade, where a stack may still be. */
function fallbackOf(by: ListedBy, query: ListQuery): ListQuery | undefined {
  if (query.index === StateIndex.byTenantStatus) return queryOf(by, query.filter, false);
  if (query.legacy === undefined) return undefined;
  // The legacy indexes are sorted by updated_at: there `since` and `before` bound that.
  const { legacy, ...rest } = query;
  return { ...rest, index: legacy, sortedBy: StateAttr.updatedAt };
}

type IndexKey = Record<string, AttributeValue>;

/** Where a page ended: the index read and the key of the last entry the page took. */
interface Cursor {
  readonly index: string;
  readonly key: IndexKey;
}

const cursorText = (cursor: Cursor) =>
  Buffer.from(JSON.stringify(cursor), "utf8").toString("base64url");

function cursorOf(value: string): Cursor {
  try {
    const cursor = JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as Cursor;
    if (typeof cursor.index === "string" && typeof cursor.key === "object" && cursor.key !== null)
      return cursor;
  } catch {}
  throw new ListPageError(`${JSON.stringify(value)} is not where a page of a list ended`);
}

async function listed(
  stack: OpsStack,
  query: ListQuery,
  limit: number,
  from: IndexKey | undefined,
): Promise<SummaryPage> {
  const rows: { row: SummaryRow; key: IndexKey }[] = [];
  const lookback = query.exact ? Number.POSITIVE_INFINITY : Math.max(limit, LOOKBACK);
  let seen = 0;
  let start = from;
  for (;;) {
    const wanted = query.exact ? limit - rows.length : 100;
    const size = Math.min(100, wanted, lookback - seen);
    const page = await indexPage(stack, query, size, start);
    seen += page.keys.length;
    rows.push(...(await rowsOf(stack, query, page.keys)));
    start = page.next;
    if (!start || rows.length >= limit || seen >= lookback) break;
  }
  const taken = rows.slice(0, limit);
  const last = taken.at(-1);
  // More may follow when the index has more, or when this page left some rows read for the next.
  const more = start !== undefined || rows.length > limit;
  return {
    rows: taken.map((r) => r.row),
    ...(more && last !== undefined
      ? { next: cursorText({ index: query.index, key: last.key }) }
      : {}),
  };
}

/** The current summaries of the listed keys still in the list and the filter. */
async function rowsOf(
  stack: OpsStack,
  query: ListQuery,
  keys: readonly IndexKey[],
): Promise<{ row: SummaryRow; key: IndexKey }[]> {
  const items = await batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.state,
    keys.map((k) => ({ [StateAttr.pk]: k[StateAttr.pk] as AttributeValue })),
    { attributes: SUMMARY_ATTRIBUTES },
  );
  const byPk = new Map(items.map((item) => [String(item[StateAttr.pk]), item]));
  const { tenant, status } = query.filter;
  return keys.flatMap((key) => {
    const item = byPk.get(String(key[StateAttr.pk]?.S));
    if (!item || item[query.attribute] !== query.value) return [];
    const row = rowOf(item);
    if (tenant !== undefined && row.tenant !== tenant) return [];
    if (status !== undefined && row.status !== status) return [];
    return [{ row, key }];
  });
}

interface IndexPage {
  readonly keys: IndexKey[];
  readonly next?: IndexKey;
}

/** The key condition of a list's partition, bounded by `since` and `before` on its sort key. */
function keyCondition(query: ListQuery) {
  const { since, before } = query.filter;
  const names = { "#k": query.attribute, "#s": query.sortedBy };
  const values: IndexKey = { ":k": { S: query.value } };
  if (since !== undefined) values[":since"] = { S: since };
  if (before !== undefined) values[":before"] = { S: before };
  const range =
    since !== undefined && before !== undefined
      ? " AND #s BETWEEN :since AND :before"
      : since !== undefined
        ? " AND #s >= :since"
        : before !== undefined
          ? " AND #s < :before"
          : "";
  return range === ""
    ? { expression: "#k = :k", names: { "#k": query.attribute }, values }
    : { expression: `#k = :k${range}`, names, values };
}

/** One page of an index's partition, newest first (`before` itself left out). */
async function indexPage(
  stack: OpsStack,
  query: ListQuery,
  limit: number,
  start: IndexKey | undefined,
): Promise<IndexPage> {
  const condition = keyCondition(query);
  const page = await stack.dynamodb.send(
    new QueryCommand({
      TableName: stack.names.tables.state,
      IndexName: query.index,
      KeyConditionExpression: condition.expression,
      ExpressionAttributeNames: condition.names,
      ExpressionAttributeValues: condition.values,
      ScanIndexForward: false,
      Limit: limit,
      ExclusiveStartKey: start,
    }),
  );
  const { before } = query.filter;
  const keys = (page.Items ?? []).filter(
    (item) => before === undefined || item[query.sortedBy]?.S !== before,
  );
  return page.LastEvaluatedKey ? { keys, next: page.LastEvaluatedKey } : { keys };
}

function sideEffectOf(item: Record<string, unknown>): SideEffectView {
  return {
    key: String(item[SideEffectAttr.effectKey]),
    state: item.state as SideEffectView["state"],
    attempts: Number(item.attempts ?? 0),
    updatedAt: String(item.updated_at),
    ...(typeof item.task_id === "string" ? { taskId: item.task_id } : {}),
  };
}

/**
 * The tenant of a task: the one its events name (the first root the events table's
 * digest-task-roots index holds for it, or task-roots for a task stored before ids carried their
 * correlation's digest, read by its key), the default tenant when that names none; undefined when
 * no event of the task is stored.
 */
export async function taskTenant(stack: OpsStack, taskId: string): Promise<string | undefined> {
  const query = (index: string) =>
    stack.dynamodb.send(
      new QueryCommand({
        TableName: stack.names.tables.events,
        IndexName: index,
        KeyConditionExpression: "#k = :k",
        ExpressionAttributeNames: { "#k": EventAttr.taskId },
        ExpressionAttributeValues: { ":k": { S: taskId } },
        Limit: 1,
      }),
    );
  // A stack still upgrading (`agentbus:traceIndexUpgrade`) may not have either index yet.
  const digested = await query(EventIndex.digestTaskRoots).catch((error: unknown) => {
    if (!missingIndex(error)) throw error;
    return undefined;
  });
  const page =
    digested?.Items?.[0] !== undefined
      ? digested
      : await query(EventIndex.taskRoots).catch((error: unknown) => {
          if (!missingIndex(error)) throw error;
          return query(LegacyTraceIndex.byTask);
        });
  const root = page.Items?.[0];
  if (!root) return undefined;
  const [item] = await batchGetItems(fromSdk(stack.dynamodb), stack.names.tables.events, [
    {
      [EventAttr.pk]: root[EventAttr.pk] as AttributeValue,
      [EventAttr.version]: root[EventAttr.version] as AttributeValue,
    },
  ]);
  return item ? tenantOf(envelopeOfItem(item)) : undefined;
}

/**
 * Side-effect records whose outcome is unknown, newest first (the by-open-state index), at most
 * `limit`; with `tenant`, those of the newest `limit` whose task is that tenant's (a record names
 * no tenant: each task's is read with taskTenant, one Query each).
 */
export async function unknownSideEffects(
  stack: OpsStack,
  limit = 100,
  tenant?: string,
): Promise<SideEffectView[]> {
  const open = await unknownRecords(stack, limit);
  if (tenant === undefined) return open;
  const tenants = new Map<string, Promise<string | undefined>>();
  const named = await Promise.all(
    open.map(async (record) => {
      const { taskId } = record;
      if (taskId === undefined) return record;
      if (!tenants.has(taskId)) tenants.set(taskId, taskTenant(stack, taskId));
      const found = await tenants.get(taskId);
      return found === undefined ? record : { ...record, tenant: found };
    }),
  );
  return named.filter((record) => record.tenant === tenant);
}

async function unknownRecords(stack: OpsStack, limit: number): Promise<SideEffectView[]> {
  const page = await stack.dynamodb.send(
    new QueryCommand({
      TableName: stack.names.tables.sideEffects,
      IndexName: SideEffectIndex.byOpenState,
      KeyConditionExpression: "#k = :k",
      ExpressionAttributeNames: { "#k": SideEffectAttr.openState },
      ExpressionAttributeValues: { ":k": { S: "unknown" } },
      ScanIndexForward: false,
      Limit: limit,
    }),
  );
  return (page.Items ?? []).map((item) => sideEffectOf(unmarshall(item)));
}

/** Side-effect records by key (BatchGetItem, 100 keys per call; unknown keys left out). */
export async function sideEffectsByKey(
  stack: OpsStack,
  keys: readonly string[],
): Promise<SideEffectView[]> {
  const items = await batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.sideEffects,
    keys.map((k) => ({ [SideEffectAttr.effectKey]: { S: k } })),
  );
  return items.map(sideEffectOf);
}
