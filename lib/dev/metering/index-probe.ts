import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { EventAttr } from "../../../functions/adapters/dynamodb/tables";
import { type IndexCatalog, type IndexEntries, indexWriteUnits } from "./index-writes";
import { itemSize, type MeterableClient } from "./metering";

/**
 * What the writes of one client cost in the indexes of each table, per item the trace indexes are
 * for (a stored event, an inbox row or failure record: an item with a correlation id), under one
 * or more table layouts at once: the deployed one, and another to compare it with (the layout
 * before, with its items as that version wrote them). The writes are the client's own; only the
 * estimate (./index-writes) differs between the layouts.
 */

type Item = Record<string, AttributeValue>;
type Input = Record<string, unknown>;

/** A layout to estimate the index writes under, and how that version wrote an item (default: the same). */
export interface ProbedLayout {
  readonly catalog: IndexCatalog;
  readonly asWritten?: (item: Item) => Item;
}

export interface TableIndexWrites {
  /**
   * Items put that carry a correlation id (indexed or not): the stored events, the inbox rows and
   * failure records.
   */
  readonly traced: number;
  /** Index write units of the table's writes, by layout name. */
  readonly units: Readonly<Record<string, number>>;
}

export interface IndexProbe {
  /**
   * By physical table name: what its writes cost in its indexes, under each layout; the items
   * `partOf` names a part of (failure records, say) under `<table>|<part>` instead.
   */
  byTable(): Record<string, TableIndexWrites>;
  reset(): void;
}

/** One item's write: a put or an update, with its table. */
interface Write {
  readonly kind: "PutItem" | "UpdateItem";
  readonly request: Input;
}

/** The single-item writes of a write request: puts and updates, each with its table. */
function writesOf(operation: string, input: Input): Write[] {
  switch (operation) {
    case "PutItem":
    case "UpdateItem":
      return [{ kind: operation, request: input }];
    case "BatchWriteItem":
      return Object.entries((input.RequestItems ?? {}) as Record<string, Input[]>).flatMap(
        ([table, requests]) =>
          requests.flatMap((r) =>
            r.PutRequest
              ? [
                  {
                    kind: "PutItem" as const,
                    request: { ...(r.PutRequest as Input), TableName: table },
                  },
                ]
              : [],
          ),
      );
    case "TransactWriteItems":
      return ((input.TransactItems ?? []) as Record<string, Input | undefined>[]).flatMap(
        (action): Write[] =>
          action.Put
            ? [{ kind: "PutItem" as const, request: action.Put }]
            : action.Update
              ? [{ kind: "UpdateItem" as const, request: action.Update }]
              : [],
      );
    default:
      return [];
  }
}

/**
 * Attach a probe to a client (a DynamoDB client the meter may also watch): after each write that
 * succeeds, its index write units by table under every layout in `layouts`.
 */
export function indexProbe(
  client: MeterableClient,
  layouts: Readonly<Record<string, ProbedLayout>>,
  partOf: (item: Item) => string | undefined = () => undefined,
): IndexProbe {
  let tables = new Map<string, { traced: number; units: Record<string, number> }>();
  let entries = new Map<string, IndexEntries>();
  const tally = (table: string) => {
    const found = tables.get(table) ?? { traced: 0, units: {} };
    tables.set(table, found);
    return found;
  };
  const count = (operation: string, input: Input) => {
    for (const { kind, request } of writesOf(operation, input)) {
      const item = (request.Item ?? request.Key) as Item | undefined;
      const part = item ? partOf(item) : undefined;
      const table = tally(`${String(request.TableName)}${part ? `|${part}` : ""}`);
      const put = kind === "PutItem" ? item : undefined;
      const correlation = put?.[EventAttr.correlationId] ?? put?.[EventAttr.traceCorrelationId];
      if (correlation) table.traced++;
      for (const [name, layout] of Object.entries(layouts)) {
        const seen = entries.get(name) ?? new Map();
        entries.set(name, seen);
        const asWritten =
          put && layout.asWritten ? { ...request, Item: layout.asWritten(put) } : request;
        table.units[name] =
          (table.units[name] ?? 0) +
          indexWriteUnits(layout.catalog, kind, asWritten, itemSize, seen);
      }
    }
  };
  client.middlewareStack.add(
    (next: (args: { input: unknown }) => Promise<unknown>, context: { commandName?: string }) =>
      async (args: { input: unknown }) => {
        const result = await next(args);
        count((context.commandName ?? "").replace(/Command$/, ""), (args.input ?? {}) as Input);
        return result;
      },
    { step: "build", name: "agentbusIndexProbe", override: true },
  );
  return {
    byTable: () =>
      Object.fromEntries(
        [...tables].map(([name, t]) => [name, { traced: t.traced, units: { ...t.units } }]),
      ),
    reset: () => {
      tables = new Map();
      entries = new Map();
    },
  };
}
