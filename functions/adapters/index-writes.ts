import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { type IndexLayout, TABLES, type TableLayout, type TableNames } from "./dynamodb/tables";

/**
 * The write units a DynamoDB write costs in the table's global secondary indexes, on top of the
 * table's own: every index entry a write creates or changes is billed like a write of that entry
 * (1 write unit per KB of what the index projects: the whole item, the keys, or the keys and the
 * included attributes). Index entries are kept up to date after the table's write, outside a
 * transaction's two phases, so a transaction's item is counted once here, not twice. Estimated
 * from the request alone:
 * - a Put item with an index's key attributes makes one entry of that index;
 * - an UpdateItem that sets an index's key attribute makes one entry, sized from its key and
 *   values (the stored item is not in the request);
 * - a Put that overwrites an item and drops it from an index, or a Delete, is not counted (one
 *   entry deleted each: the estimate stays on the low side).
 */

/** Physical table name -> the layout of that table (its key and its indexes). */
export type IndexCatalog = Readonly<Record<string, TableLayout>>;

/** The catalog of AgentBus's four tables under their physical names. */
export function indexCatalog(names: TableNames): IndexCatalog {
  return Object.fromEntries(
    (Object.keys(TABLES) as (keyof TableNames)[]).map((table) => [names[table], TABLES[table]]),
  );
}

type Item = Record<string, AttributeValue>;
type Input = Record<string, unknown>;

/** The index write units of one write request (its failed conditions write no index). */
export function indexWriteUnits(
  catalog: IndexCatalog,
  operation: string,
  input: unknown,
  size: (item: Item) => number,
): number {
  const request = (input ?? {}) as Input;
  switch (operation) {
    case "PutItem":
      return putUnits(catalog, request, size);
    case "UpdateItem":
      return updateUnits(catalog, request, size);
    case "BatchWriteItem": {
      let units = 0;
      for (const [table, requests] of Object.entries(
        (request.RequestItems ?? {}) as Record<string, Input[]>,
      ))
        for (const r of requests) {
          const put = r.PutRequest as Input | undefined;
          if (put) units += putUnits(catalog, { ...put, TableName: table }, size);
        }
      return units;
    }
    case "TransactWriteItems":
      return ((request.TransactItems ?? []) as Record<string, Input | undefined>[]).reduce(
        (sum, action) =>
          sum +
          (action.Put
            ? putUnits(catalog, action.Put, size)
            : action.Update
              ? updateUnits(catalog, action.Update, size)
              : 0),
        0,
      );
    default:
      return 0;
  }
}

const unitsOf = (bytes: number) => Math.max(1, Math.ceil(bytes / 1024));

function putUnits(catalog: IndexCatalog, put: Input, size: (item: Item) => number): number {
  const item = (put.Item ?? {}) as Item;
  const table = catalog[String(put.TableName)];
  let units = 0;
  for (const index of table?.indexes ?? []) {
    if (!(index.partitionKey.name in item)) continue;
    if (index.sortKey && !(index.sortKey.name in item)) continue;
    units += unitsOf(size(projected(table as TableLayout, index, item)));
  }
  return units;
}

function updateUnits(catalog: IndexCatalog, update: Input, size: (item: Item) => number): number {
  const set = new Set(Object.values((update.ExpressionAttributeNames ?? {}) as object));
  const expression = String(update.UpdateExpression ?? "");
  let units = 0;
  for (const index of catalog[String(update.TableName)]?.indexes ?? []) {
    if (!set.has(index.partitionKey.name) || !/\bSET\b/i.test(expression)) continue;
    units += unitsOf(
      size((update.Key ?? {}) as Item) + size((update.ExpressionAttributeValues ?? {}) as Item),
    );
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
