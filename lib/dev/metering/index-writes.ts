import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import {
  type IndexLayout,
  LEGACY_EVENT_TRACE_INDEXES,
  LEGACY_INBOX_TRACE_INDEXES,
  TABLES,
  type TableLayout,
} from "../../../functions/adapters/dynamodb/layouts";
import {
  EVENT_TRACE_INDEXES,
  EventAttr,
  type TableNames,
} from "../../../functions/adapters/dynamodb/tables";

/**
 * The write units a DynamoDB write costs in the table's global secondary indexes, on top of the
 * table's own: every index entry a write creates or changes is billed like a write of that entry
 * (1 write unit per KB of what the index projects: the whole item, the keys, or the keys and the
 * included attributes). Index entries are kept up to date after the table's write, outside a
 * transaction's two phases, so a transaction's item is counted once here, not twice. Estimated
 * from the requests, and from the entries the same meter saw written before (`IndexEntries`):
 * - a Put item with an index's key attributes makes or refreshes one entry of that index; one
 *   whose index key differs from the entry the item had costs two (delete and put); one that
 *   drops out of an index, one (the delete);
 * - an UpdateItem that sets an index key attribute (`SET #k = :v`) moves the entry likewise,
 *   sized from its key and values (the stored item is not in the request), and one that sets
 *   other attributes of an item in an index refreshes its entry (keys-only entries excepted);
 * - a Delete, and an entry whose earlier write this meter did not see, are not counted: the
 *   estimate stays on the low side.
 */

/** Physical table name -> the layout of that table (its key and its indexes). */
export type IndexCatalog = Readonly<Record<string, TableLayout>>;

/** The catalog of AgentBus's four tables under their physical names. */
export function indexCatalog(names: TableNames): IndexCatalog {
  // The tables `names` names: TABLES also holds the payments stand-in's layout, in no TableNames.
  const named = (Object.keys(TABLES) as (keyof typeof TABLES)[]).filter(
    (table): table is keyof TableNames => table in names,
  );
  return Object.fromEntries(named.map((table) => [names[table], TABLES[table]]));
}

/**
 * For each index of one table, the catalog of the four tables with that table holding that index
 * alone: what a probe (./index-probe) estimates under each is that index's share of the table's
 * index writes.
 */
export function catalogPerIndex(
  names: TableNames,
  table: keyof TableNames,
): Record<string, IndexCatalog> {
  const layout = TABLES[table] as TableLayout;
  return Object.fromEntries(
    (layout.indexes ?? []).map((index) => [
      index.name,
      { ...indexCatalog(names), [names[table]]: { ...layout, indexes: [index] } },
    ]),
  );
}

/**
 * The catalog of the four tables as stacks deployed them before task roots: the events and inbox
 * tables with the legacy trace indexes (by-correlation and by-task, projecting all, and the events
 * table's by-hour) instead of the current ones; with legacyItem, what the writes of today would
 * have cost in them.
 */
export function legacyTraceCatalog(names: TableNames): IndexCatalog {
  const legacy = (layout: TableLayout, trace: readonly IndexLayout[]): TableLayout => ({
    ...layout,
    indexes: [
      ...trace,
      ...(layout.indexes ?? []).filter((i) => !EVENT_TRACE_INDEXES.includes(i.name)),
    ],
  });
  return {
    ...indexCatalog(names),
    [names.events]: legacy(TABLES.events, LEGACY_EVENT_TRACE_INDEXES),
    [names.inbox]: legacy(TABLES.inbox, LEGACY_INBOX_TRACE_INDEXES),
  };
}

/**
 * An item as the version before task roots wrote it: every event and row with its `task_id` and
 * `correlation_id`, an event with its id in `event_id` (not `stored_id`, no `trace_digest`) and
 * with the hour and UTC time of its `occurred_at` (the keys of by-hour).
 */
export function legacyItem(item: Item): Item {
  const {
    [EventAttr.traceTaskId]: task,
    [EventAttr.traceCorrelationId]: correlation,
    [EventAttr.storedId]: storedId,
    [EventAttr.traceDigest]: _digest,
    ...rest
  } = item;
  const occurred = item[EventAttr.occurredAt]?.S;
  const isEvent = item[EventAttr.eventId] !== undefined || storedId !== undefined;
  const utc = occurred && isEvent ? new Date(occurred).toISOString() : undefined;
  return {
    ...rest,
    ...(storedId ? { [EventAttr.eventId]: storedId } : {}),
    ...(task ? { [EventAttr.taskId]: task } : {}),
    ...(correlation ? { [EventAttr.correlationId]: correlation } : {}),
    ...(utc
      ? { [EventAttr.occurredHour]: { S: utc.slice(0, 13) }, [EventAttr.occurredUtc]: { S: utc } }
      : {}),
  };
}

type Item = Record<string, AttributeValue>;
type Input = Record<string, unknown>;

/**
 * The index entries a meter has seen written, by table, index and item: an entry whose key changes
 * costs two writes (the old entry deleted, the new one put), one that leaves the index one, a
 * keys-only entry whose key stays the same none. Without it every write is taken as new.
 */
export type IndexEntries = Map<string, string>;

/** The index write units of one write request (its failed conditions write no index). */
export function indexWriteUnits(
  catalog: IndexCatalog,
  operation: string,
  input: unknown,
  size: (item: Item) => number,
  entries: IndexEntries = new Map(),
): number {
  const request = (input ?? {}) as Input;
  const put = (p: Input) => putUnits(catalog, p, size, entries);
  const update = (u: Input) => updateUnits(catalog, u, size, entries);
  switch (operation) {
    case "PutItem":
      return put(request);
    case "UpdateItem":
      return update(request);
    case "BatchWriteItem": {
      let units = 0;
      for (const [table, requests] of Object.entries(
        (request.RequestItems ?? {}) as Record<string, Input[]>,
      ))
        for (const r of requests) {
          const item = r.PutRequest as Input | undefined;
          if (item) units += put({ ...item, TableName: table });
        }
      return units;
    }
    case "TransactWriteItems":
      return ((request.TransactItems ?? []) as Record<string, Input | undefined>[]).reduce(
        (sum, action) =>
          sum + (action.Put ? put(action.Put) : action.Update ? update(action.Update) : 0),
        0,
      );
    default:
      return 0;
  }
}

/** Write units of an item (or an index entry) of this many bytes: 1 per KB, at least 1. */
export const writeUnitsOf = (bytes: number) => Math.max(1, Math.ceil(bytes / 1024));

/** The index key of an item (its values of the index's key attributes); undefined: not in it. */
function keyOf(index: IndexLayout, values: (name: string) => AttributeValue | undefined) {
  const partition = values(index.partitionKey.name);
  const sort = index.sortKey ? values(index.sortKey.name) : undefined;
  if (partition === undefined || (index.sortKey && sort === undefined)) return undefined;
  return JSON.stringify([partition, sort ?? null]);
}

/** Writes an entry's move from `before` to `after` costs (keys only: no attribute to refresh). */
function entryWrites(index: IndexLayout, before?: string, after?: string): number {
  if (before === undefined) return after === undefined ? 0 : 1;
  if (after === undefined) return 1;
  if (before !== after) return 2;
  return index.projection === "KEYS_ONLY" ? 0 : 1;
}

function itemKeyOf(table: TableLayout, item: Item): string {
  return JSON.stringify([
    item[table.partitionKey.name],
    table.sortKey ? item[table.sortKey.name] : null,
  ]);
}

function putUnits(
  catalog: IndexCatalog,
  put: Input,
  size: (item: Item) => number,
  entries: IndexEntries,
): number {
  const item = (put.Item ?? {}) as Item;
  const table = catalog[String(put.TableName)];
  if (!table) return 0;
  const at = `${String(put.TableName)}|${itemKeyOf(table, item)}`;
  let units = 0;
  for (const index of table.indexes ?? []) {
    const slot = `${at}|${index.name}`;
    const after = keyOf(index, (name) => item[name]);
    units +=
      entryWrites(index, entries.get(slot), after) *
      writeUnitsOf(size(projected(table, index, item)));
    if (after === undefined) entries.delete(slot);
    else entries.set(slot, after);
  }
  return units;
}

/** `#name = :value` assignments of an update's SET clause, by attribute name. */
function assignments(update: Input): Map<string, AttributeValue> {
  const names = (update.ExpressionAttributeNames ?? {}) as Record<string, string>;
  const values = (update.ExpressionAttributeValues ?? {}) as Record<string, AttributeValue>;
  const set = new Map<string, AttributeValue>();
  const clause = /\bSET\b(.*?)(\bREMOVE\b|\bADD\b|\bDELETE\b|$)/is.exec(
    String(update.UpdateExpression ?? ""),
  )?.[1];
  for (const [, name, value] of (clause ?? "").matchAll(/(#\w+)\s*=\s*(:\w+)/g)) {
    const attribute = name ? (names[name] ?? name) : undefined;
    const assigned = value ? values[value] : undefined;
    if (attribute && assigned) set.set(attribute, assigned);
  }
  return set;
}

function updateUnits(
  catalog: IndexCatalog,
  update: Input,
  size: (item: Item) => number,
  entries: IndexEntries,
): number {
  const table = catalog[String(update.TableName)];
  if (!table) return 0;
  const set = assignments(update);
  const at = `${String(update.TableName)}|${itemKeyOf(table, (update.Key ?? {}) as Item)}`;
  const entrySize = writeUnitsOf(
    size((update.Key ?? {}) as Item) + size((update.ExpressionAttributeValues ?? {}) as Item),
  );
  let units = 0;
  for (const index of table.indexes ?? []) {
    const slot = `${at}|${index.name}`;
    const before = entries.get(slot);
    const [partition, sort] = before ? (JSON.parse(before) as (AttributeValue | null)[]) : [];
    const after = keyOf(
      index,
      (name) =>
        set.get(name) ??
        ((name === index.partitionKey.name ? partition : sort) as AttributeValue | undefined) ??
        undefined,
    );
    if (before === undefined && after === undefined) continue;
    units += entryWrites(index, before, after) * entrySize;
    if (after !== undefined) entries.set(slot, after);
  }
  return units;
}

/** What the index keeps of the item; the table's own key is in every entry as well. */
function projected(table: TableLayout, index: IndexLayout, item: Item): Item {
  if (index.projection === "ALL") return item;
  const names = [
    table.partitionKey.name,
    ...(table.sortKey ? [table.sortKey.name] : []),
    index.partitionKey.name,
    ...(index.sortKey ? [index.sortKey.name] : []),
    ...(index.projection === "KEYS_ONLY" ? [] : index.projection.include),
  ];
  const entry: Item = {};
  for (const name of names) if (item[name] !== undefined) entry[name] = item[name];
  return entry;
}
