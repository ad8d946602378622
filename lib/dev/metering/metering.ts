import { AsyncLocalStorage } from "node:async_hooks";
import {
  type AttributeValue,
  type ConsumedCapacity,
  GetItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { type BilledCall, billedCall } from "./billing";
import {
  type IndexCatalog,
  type IndexEntries,
  indexWriteUnits,
  writeUnitsOf,
} from "./index-writes";

/**
 * Per-client metering of AWS SDK v3 calls: how many calls of each operation, the requests each is
 * billed as (./billing.ts: SQS and EventBridge bill per 64 KB chunk), and for DynamoDB the read
 * and write capacity units consumed. Used by the benchmark and by tests that assert "one
 * BatchGetItem per load, one TransactWriteItems per commit". A call is counted when it ends, in
 * the tallies (and the scope) of that moment: a poller's long poll that began before a `reset()`
 * and returned a message after it belongs to the metered play.
 *
 * Capacity: when the caller asked for `ConsumedCapacity` (`ReturnConsumedCapacity`) and the
 * response carries it, that number is used; a figure nobody asked for is ignored. Otherwise the
 * units are estimated the way DynamoDB bills on-demand tables:
 * - write: per item ceil(size / 1 KB), at least 1; TransactWriteItems counts 2x per action;
 *   an update (UpdateItem, a transaction's Update) bills the whole item, the larger of its sizes
 *   before and after, which the request does not show: a meter on a client that can send reads
 *   the item before and after the call (strongly consistent GetItems, themselves not metered),
 *   else the update is sized from its key and expression values; DeleteItem and ConditionCheck
 *   count 1.
 * - read: per item ceil(size / 4 KB) (Query/Scan: of the summed size of the page), halved for
 *   eventually consistent reads; TransactGetItems counts 2x; a GetItem or BatchGetItem key that
 *   finds nothing still costs one minimum read.
 * - item size = sum over attributes of (UTF-8 name length + value size), value size per the
 *   DynamoDB rules (string: UTF-8 bytes; number: about 1 byte per 2 significant digits + 1;
 *   binary: bytes; boolean/null: 1; list/map: 3 + 1 per element + the elements). It is a close
 *   approximation, not DynamoDB's exact accounting.
 * - failed conditional writes (ConditionalCheckFailedException, or a transaction cancelled by a
 *   failed condition) are counted as well: DynamoDB bills the write capacity of a failed
 *   condition.
 * - global secondary indexes: a meter given the tables' layouts (`meter(client, { indexes })`)
 *   adds what each write costs in the indexes its item enters (./index-writes); without them
 *   only the tables' own units are counted.
 * The meter never changes requests: it does not add ReturnConsumedCapacity, because moto reports
 * constant, size-blind numbers (PutItem 1, UpdateItem 0.5, TransactWriteItems an empty list) that
 * would be worse than the estimate.
 */
export interface MeterSnapshot {
  /** Calls per operation name (`PutItem`, `TransactWriteItems`, `SendMessageBatch`, ...). */
  readonly calls: Record<string, number>;
  readonly writeUnits: number;
  readonly readUnits: number;
  /** Of the write units, those of index entries (0 without the tables' layouts). */
  readonly indexWriteUnits: number;
  /**
   * Billed requests per operation (./billing.ts): for SQS one per 64 KB chunk of a request's
   * payload, for EventBridge PutEvents one per 64 KB chunk of each entry, else one per call.
   */
  readonly billed: Record<string, number>;
  /** SQS ReceiveMessage calls that returned no message. */
  readonly emptyReceives: number;
  /** Per SQS queue URL: messages sent through the client, and messages received for the first time. */
  readonly queues: Record<string, QueueTally>;
}

export interface QueueTally {
  /** Billed requests made to the queue (./billing.ts), empty receives included. */
  readonly requests: number;
  readonly emptyReceives: number;
  readonly sent: number;
  readonly firstReceived: number;
}

/** One metered DynamoDB write (MeterOptions.recordWrites): what it wrote and what it cost. */
export interface MeteredWrite {
  /** The scope it was made in (inMeterScope); undefined outside any. */
  readonly scope: string | undefined;
  readonly operation: string;
  /** Each item it writes, in order: its table, its `pk` and the bytes billed for it. */
  readonly items: readonly WrittenItem[];
  /** Write units, the indexes' included. */
  readonly writeUnits: number;
  readonly indexWriteUnits: number;
  /** Its condition failed: billed all the same, nothing written. */
  readonly failed?: true;
}

export interface WrittenItem {
  readonly table: string;
  /** The item's `pk` (every AgentBus table's partition key); "?" for a table keyed otherwise. */
  readonly key: string;
  readonly bytes: number;
}

export interface Meter {
  snapshot(): MeterSnapshot;
  /** The DynamoDB writes since the last reset, in order, when asked for (MeterOptions.recordWrites). */
  writes(): readonly MeteredWrite[];
  /** What was counted inside each scope (inMeterScope), by scope. */
  byScope(): Record<string, MeterSnapshot>;
  reset(): void;
}

type Next = (args: { input: unknown }) => Promise<{ output: unknown }>;
type MeterMiddleware = (next: Next, context: { commandName?: string }) => Next;

/** Any SDK v3 client (or DynamoDBDocumentClient, which shares its client's middleware stack). */
export interface MeterableClient {
  readonly middlewareStack: {
    // biome-ignore lint/suspicious/noExplicitAny: the SDK's overloaded `add` accepts every step's middleware type
    add(middleware: any, options: { step: "build"; name: string; override?: boolean }): void;
  };
}

const MIDDLEWARE_NAME = "agentbusMeter";
const meters = new WeakMap<object, Meter>();
/** Per client: the tables' layouts, and the index entries its writes made (./index-writes). */
const catalogs = new WeakMap<object, { catalog: IndexCatalog; entries: IndexEntries }>();
/** Per client asked to record its writes: those since the last reset. */
const writeLogs = new WeakMap<object, MeteredWrite[]>();

export interface MeterOptions {
  /** The layouts of the tables by physical name, to count their index writes (./index-writes). */
  readonly indexes?: IndexCatalog;
  /** Keep each DynamoDB write, with its items and units, for `Meter.writes()`. */
  readonly recordWrites?: boolean;
}

/**
 * Attach a meter to a client (once: a second call returns the same meter). The middleware sits in
 * the `build` step: after serialization input has been marshalled (so a DocumentClient's items
 * are sized like a low-level client's) and before the retry middleware (`finalizeRequest`), so a
 * call retried by the SDK counts once.
 */
export function meter(client: MeterableClient, options: MeterOptions = {}): Meter {
  if (options.indexes)
    catalogs.set(client.middlewareStack, { catalog: options.indexes, entries: new Map() });
  if (options.recordWrites) writeLogs.set(client.middlewareStack, []);
  const existing = meters.get(client.middlewareStack);
  if (existing) return existing;
  const indexes = () => catalogs.get(client.middlewareStack) ?? { catalog: {}, entries: new Map() };
  let total = new Tally();
  let scopes = new Map<string, Tally>();
  const tallies = (): Tally[] => {
    const scope = meterScopes.getStore();
    if (scope === undefined) return [total];
    const tally = scopes.get(scope) ?? new Tally();
    scopes.set(scope, tally);
    return [total, tally];
  };
  const middleware = meteringMiddleware(client, tallies, indexes);
  client.middlewareStack.add(middleware, { step: "build", name: MIDDLEWARE_NAME, override: true });
  const created: Meter = {
    snapshot: () => total.snapshot(),
    writes: () => [...(writeLogs.get(client.middlewareStack) ?? [])],
    byScope: () =>
      Object.fromEntries([...scopes].map(([scope, tally]) => [scope, tally.snapshot()])),
    reset: () => {
      total = new Tally();
      scopes = new Map();
      writeLogs.get(client.middlewareStack)?.splice(0);
    },
  };
  meters.set(client.middlewareStack, created);
  return created;
}

/**
 * The middleware of a meter: each call's units and billed requests added to `tallies()` (the
 * total and the call's scope) when the call ends, so that a long poll begun before a reset and
 * answered after it is billed in the play whose message it received.
 */
function meteringMiddleware(
  client: MeterableClient,
  tallies: () => Tally[],
  indexes: () => { catalog: IndexCatalog; entries: IndexEntries },
): MeterMiddleware {
  const sizes = storedSizes(client);
  return (next, context) => async (args) => {
    if (unmetered.getStore()) return next(args);
    const operation = (context.commandName ?? "Unknown").replace(/Command$/, "");
    const counted = () => {
      const current = tallies();
      for (const t of current) t.calls[operation] = (t.calls[operation] ?? 0) + 1;
      return current;
    };
    const updated = updatedKeys(operation, args.input);
    const before = await sizes(updated);
    try {
      const result = await next(args);
      const after = await sizes(updated);
      const stored = before.map((size, i) => Math.max(size, after[i] ?? 0));
      const usage = capacity(operation, args.input, result.output, indexes(), stored);
      const billed = billedCall(operation, args.input, result.output);
      for (const t of counted()) {
        t.add(usage.write, usage.read, usage.index);
        t.bill(operation, billed);
      }
      logWrite(client.middlewareStack, operation, args.input, stored, usage);
      return result;
    } catch (error) {
      const failed = counted();
      if (failedCondition(error)) {
        const write = estimateWrites(operation, args.input, undefined, before);
        for (const t of failed) t.add(write, 0, 0);
        logWrite(client.middlewareStack, operation, args.input, before, { write, index: 0 }, true);
      }
      throw error;
    }
  };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** What one meter (or one scope of it) has counted. */
class Tally {
  readonly calls: Record<string, number> = {};
  writeUnits = 0;
  readUnits = 0;
  indexWriteUnits = 0;
  readonly billed: Record<string, number> = {};
  emptyReceives = 0;
  readonly queues: Record<string, Mutable<QueueTally>> = {};
  add(write: number, read: number, index: number): void {
    this.writeUnits += write;
    this.readUnits += read;
    this.indexWriteUnits += index;
  }
  bill(operation: string, call: BilledCall): void {
    this.billed[operation] = (this.billed[operation] ?? 0) + call.requests;
    if (call.emptyReceive) this.emptyReceives++;
    if (!call.queueUrl) return;
    const queue = this.queues[call.queueUrl] ?? {
      requests: 0,
      emptyReceives: 0,
      sent: 0,
      firstReceived: 0,
    };
    queue.requests += call.requests;
    if (call.emptyReceive) queue.emptyReceives++;
    queue.sent += call.sent;
    queue.firstReceived += call.firstReceived;
    this.queues[call.queueUrl] = queue;
  }
  snapshot(): MeterSnapshot {
    return {
      calls: { ...this.calls },
      writeUnits: this.writeUnits,
      readUnits: this.readUnits,
      indexWriteUnits: this.indexWriteUnits,
      billed: { ...this.billed },
      emptyReceives: this.emptyReceives,
      queues: Object.fromEntries(Object.entries(this.queues).map(([url, q]) => [url, { ...q }])),
    };
  }
}

const meterScopes = new AsyncLocalStorage<string>();
/** Set while the meter reads an item's stored size: those reads are not counted. */
const unmetered = new AsyncLocalStorage<boolean>();

type ItemKey = { readonly TableName: string; readonly Key: Item };

/** Adds a DynamoDB write to the client's log, when it keeps one (MeterOptions.recordWrites). */
function logWrite(
  stack: object,
  operation: string,
  input: unknown,
  stored: readonly number[],
  units: { readonly write: number; readonly index: number },
  failed?: true,
): void {
  const log = writeLogs.get(stack);
  if (!log || !DYNAMODB_WRITES.has(operation)) return;
  const write = meteredWrite(operation, input, stored, units.write, units.index);
  log.push(failed ? { ...write, failed } : write);
}

/**
 * A write as the log keeps it (MeteredWrite): each item's table, key and billed bytes (an update's
 * the larger of what it sends and the item it changes, `stored`, as estimateWrites bills it).
 */
function meteredWrite(
  operation: string,
  input: unknown,
  stored: readonly number[],
  writeUnits: number,
  indexWriteUnits: number,
): MeteredWrite {
  const request = (input ?? {}) as Input;
  let update = 0;
  const written = (table: unknown, action: Input, kind: string): WrittenItem => {
    const key = ((action.Item ?? action.Key) as Item | undefined)?.pk?.S ?? "?";
    const bytes =
      kind === "Put"
        ? itemSize(action.Item)
        : kind === "Update"
          ? Math.max(updateSize(action), stored[update++] ?? 0)
          : itemSize(action.Key);
    return { table: String(table), key, bytes };
  };
  const items: WrittenItem[] = [];
  if (operation === "TransactWriteItems")
    for (const action of (request.TransactItems ?? []) as Record<string, Input>[])
      for (const [kind, part] of Object.entries(action))
        items.push(written(part.TableName, part, kind));
  else if (operation === "BatchWriteItem")
    for (const [table, requests] of Object.entries(
      (request.RequestItems ?? {}) as Record<string, Input[]>,
    ))
      for (const r of requests)
        items.push(
          r.PutRequest
            ? written(table, r.PutRequest as Input, "Put")
            : written(table, r.DeleteRequest as Input, "Delete"),
        );
  else items.push(written(request.TableName, request, operation.replace(/Item$/, "")));
  return { scope: meterScopes.getStore(), operation, items, writeUnits, indexWriteUnits };
}

/** The items an operation updates (UpdateItem, a transaction's Update actions), in order. */
function updatedKeys(operation: string, input: unknown): ItemKey[] {
  const request = (input ?? {}) as Input;
  if (operation === "UpdateItem") return [request as unknown as ItemKey];
  if (operation !== "TransactWriteItems") return [];
  const actions = (request.TransactItems ?? []) as { Update?: ItemKey }[];
  return actions.flatMap((a) => (a.Update ? [a.Update] : []));
}

/**
 * Reads the stored size of items (0 when absent or unreadable) through the metered client, not
 * counted; a client that cannot send sizes nothing.
 */
function storedSizes(client: MeterableClient): (keys: ItemKey[]) => Promise<number[]> {
  const send = (client as { send?: (command: GetItemCommand) => Promise<{ Item?: Item }> }).send;
  if (typeof send !== "function") return async (keys) => keys.map(() => 0);
  return (keys) =>
    unmetered.run(true, () =>
      Promise.all(
        keys.map(({ TableName, Key }) =>
          send
            .call(client, new GetItemCommand({ TableName, Key, ConsistentRead: true }))
            .then((out) => itemSize(out.Item))
            .catch(() => 0),
        ),
      ),
    );
}

/**
 * Runs `work` with every metered call made inside it (and in what it awaits) counted under
 * `scope` as well as in the meter's total: the local runtime runs each invocation in the scope of
 * its consumer group, so one meter on shared clients tells the groups' calls apart.
 */
export function inMeterScope<T>(scope: string, work: () => T): T {
  return meterScopes.run(scope, work);
}

/**
 * The scopes of calls AWS makes on the stack's behalf, which the local runtime makes itself: an
 * SQS event source mapping's receives and deletes (the Lambda service's pollers, billed to the
 * queue's owner) and a pipe's.
 */
export const SERVICE_SCOPES = {
  sqsPoller: "aws:lambda-sqs-poller",
  pipe: "aws:pipes",
  subscriber: "aws:eventbridge-subscribers",
} as const;

/** The DynamoDB operations that write (billed in write units). */
export const DYNAMODB_WRITES: ReadonlySet<string> = new Set([
  "PutItem",
  "UpdateItem",
  "DeleteItem",
  "BatchWriteItem",
  "TransactWriteItems",
]);
const READS = new Set(["GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"]);

type Input = Record<string, unknown>;
type Item = Record<string, AttributeValue>;

function capacity(
  operation: string,
  input: unknown,
  output: unknown,
  { catalog, entries }: { catalog: IndexCatalog; entries: IndexEntries },
  stored: readonly number[],
) {
  const isWrite = DYNAMODB_WRITES.has(operation);
  if (!isWrite && !READS.has(operation)) return { write: 0, read: 0, index: 0 };
  // A figure the caller did not ask for is not trusted: emulators volunteer size-blind numbers.
  const asked = (input as { ReturnConsumedCapacity?: string } | undefined)?.ReturnConsumedCapacity;
  const reported = asked && asked !== "NONE" ? reportedCapacity(output, isWrite) : undefined;
  if (isWrite) {
    // A reported figure includes the indexes' units (ReturnConsumedCapacity TOTAL).
    if (reported !== undefined) return { write: reported, read: 0, index: 0 };
    const index = indexWriteUnits(catalog, operation, input, itemSize, entries);
    return { write: estimateWrites(operation, input, output, stored) + index, read: 0, index };
  }
  return { write: 0, read: reported ?? estimateReads(operation, input, output), index: 0 };
}

function reportedCapacity(output: unknown, isWrite: boolean): number | undefined {
  const consumed = (output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] })
    ?.ConsumedCapacity;
  const list = Array.isArray(consumed) ? consumed : consumed ? [consumed] : [];
  if (list.length === 0) return undefined;
  return list.reduce(
    (sum, c) =>
      sum + ((isWrite ? c.WriteCapacityUnits : c.ReadCapacityUnits) ?? c.CapacityUnits ?? 0),
    0,
  );
}

function failedCondition(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name === "ConditionalCheckFailedException") return true;
  if (error.name !== "TransactionCanceledException") return false;
  const reasons = (error as { CancellationReasons?: { Code?: string }[] }).CancellationReasons;
  return (reasons ?? []).some((r) => r.Code === "ConditionalCheckFailed");
}

const readUnitsOf = (bytes: number) => Math.max(1, Math.ceil(bytes / 4096));

/** `stored`: the stored sizes of the items the operation updates, in order (updatedKeys). */
function estimateWrites(
  operation: string,
  input: unknown,
  output: unknown,
  stored: readonly number[] = [],
): number {
  const request = (input ?? {}) as Input;
  switch (operation) {
    case "PutItem":
      return writeUnitsOf(itemSize(request.Item));
    case "UpdateItem":
      return writeUnitsOf(Math.max(updateSize(request), stored[0] ?? 0));
    case "DeleteItem":
      return 1;
    case "BatchWriteItem": {
      const units = batchWriteUnits(request.RequestItems);
      const unprocessed = batchWriteUnits((output as Input | undefined)?.UnprocessedItems);
      return Math.max(0, units - unprocessed);
    }
    case "TransactWriteItems": {
      const items = (request.TransactItems ?? []) as Record<string, Input | undefined>[];
      let update = 0;
      return items.reduce((sum, action) => {
        if (action.Put) return sum + 2 * writeUnitsOf(itemSize(action.Put.Item));
        if (action.Update) {
          const size = Math.max(updateSize(action.Update), stored[update++] ?? 0);
          return sum + 2 * writeUnitsOf(size);
        }
        return sum + 2;
      }, 0);
    }
    default:
      return 0;
  }
}

function batchWriteUnits(requestItems: unknown): number {
  let units = 0;
  for (const requests of Object.values((requestItems ?? {}) as Record<string, Input[]>)) {
    for (const request of requests) {
      const put = request.PutRequest as Input | undefined;
      units += put ? writeUnitsOf(itemSize(put.Item)) : 1;
    }
  }
  return units;
}

function updateSize(update: Input): number {
  return itemSize(update.Key) + itemSize(update.ExpressionAttributeValues);
}

function estimateReads(operation: string, input: unknown, output: unknown): number {
  const request = (input ?? {}) as Input;
  const response = (output ?? {}) as Input;
  const factor = (consistent: unknown) => (consistent === true ? 1 : 0.5);
  switch (operation) {
    case "GetItem":
      return factor(request.ConsistentRead) * readUnitsOf(itemSize(response.Item));
    case "Query":
    case "Scan": {
      const items = (response.Items ?? []) as unknown[];
      const bytes = items.reduce<number>((sum, item) => sum + itemSize(item), 0);
      return factor(request.ConsistentRead) * readUnitsOf(bytes);
    }
    case "BatchGetItem": {
      // Each key is a GetItem: one that finds nothing is still billed as a minimum read.
      const asked = (request.RequestItems ?? {}) as Record<string, Input & { Keys?: unknown[] }>;
      const responses = (response.Responses ?? {}) as Record<string, unknown[]>;
      const unprocessed = (response.UnprocessedKeys ?? {}) as Record<string, { Keys?: unknown[] }>;
      let units = 0;
      for (const [table, request] of Object.entries(asked)) {
        const f = factor(request.ConsistentRead);
        const items = responses[table] ?? [];
        for (const item of items) units += f * readUnitsOf(itemSize(item));
        const misses =
          (request.Keys?.length ?? 0) - items.length - (unprocessed[table]?.Keys?.length ?? 0);
        units += f * Math.max(0, misses);
      }
      return units;
    }
    case "TransactGetItems": {
      const items = (response.Responses ?? []) as { Item?: unknown }[];
      return items.reduce((sum, r) => sum + 2 * readUnitsOf(itemSize(r.Item)), 0);
    }
    default:
      return 0;
  }
}

const TYPE_KEYS = new Set(["S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"]);

/** Output items are plain JavaScript when a DocumentClient unmarshalled them: size their marshalled form. */
function asMarshalled(item: unknown): Item | undefined {
  if (!item || typeof item !== "object") return undefined;
  const values = Object.values(item);
  const marshalled = values.every(
    (v) =>
      v !== null &&
      typeof v === "object" &&
      Object.keys(v).length === 1 &&
      TYPE_KEYS.has(Object.keys(v)[0] ?? ""),
  );
  if (marshalled) return item as Item;
  try {
    return marshall(item, { removeUndefinedValues: true, convertClassInstanceToMap: true });
  } catch {
    return undefined;
  }
}

const utf8 = (text: string) => Buffer.byteLength(text, "utf8");

/** Approximate DynamoDB item size in bytes (see the rules above). */
export function itemSize(item: unknown): number {
  const marshalled = asMarshalled(item);
  if (!marshalled) return 0;
  let bytes = 0;
  for (const [name, value] of Object.entries(marshalled)) bytes += utf8(name) + valueSize(value);
  return bytes;
}

function numberSize(n: string): number {
  const digits = n
    .replace(/^[-+]/, "")
    .replace(/[eE].*$/, "")
    .replace(".", "")
    .replace(/^0+/, "");
  return Math.ceil(Math.max(1, digits.length) / 2) + 1;
}

function binarySize(b: unknown): number {
  if (b instanceof Uint8Array) return b.byteLength;
  if (typeof b === "string") return Buffer.from(b, "base64").byteLength;
  return 0;
}

function valueSize(value: AttributeValue): number {
  if (value.S !== undefined) return utf8(value.S);
  if (value.N !== undefined) return numberSize(value.N);
  if (value.B !== undefined) return binarySize(value.B);
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.SS !== undefined) return value.SS.reduce((s, x) => s + utf8(x), 0);
  if (value.NS !== undefined) return value.NS.reduce((s, x) => s + numberSize(x), 0);
  if (value.BS !== undefined) return value.BS.reduce((s, x) => s + binarySize(x), 0);
  if (value.L !== undefined) return 3 + value.L.reduce((s, x) => s + 1 + valueSize(x), 0);
  if (value.M !== undefined)
    return (
      3 + Object.entries(value.M).reduce((s, [name, x]) => s + 1 + utf8(name) + valueSize(x), 0)
    );
  return 0;
}
