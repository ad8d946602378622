import type {
  AttributeValue,
  BatchGetItemCommandOutput,
  KeysAndAttributes,
  QueryCommandInput,
} from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { backoff, sleep } from "../../core/batching";
import { TransientError } from "../../core/errors";
import type { AwsClient } from "../aws/client";
import { BatchGetItem, Query } from "../aws/operations";
import { dynamoFailure } from "./failure";

/** BatchGetItem takes at most 100 keys. */
export const MAX_BATCH_GET_KEYS = 100;

export interface BatchGetOptions {
  /** Rounds of BatchGetItem for UnprocessedKeys before giving up with a TransientError. */
  readonly maxAttempts?: number;
  readonly wait?: (ms: number) => Promise<void>;
}

/** Every page of a Query (following LastEvaluatedKey), unmarshalled. */
export async function queryAll(
  client: AwsClient,
  input: QueryCommandInput,
): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  try {
    let start: QueryCommandInput["ExclusiveStartKey"];
    do {
      const page = await client.send(Query({ ...input, ExclusiveStartKey: start }));
      for (const item of page.Items ?? []) items.push(unmarshall(item));
      start = page.LastEvaluatedKey;
    } while (start);
  } catch (error) {
    throw dynamoFailure(error, "Query");
  }
  return items;
}

/** The most items a page of queryWhile asks for. */
export const QUERY_WHILE_MAX_PAGE = 1000;

/**
 * The items of a Query in key order up to the first one `keep` refuses (that one and the rest
 * left out), page by page: a Query that may end early, such as a run of a stream's events. The
 * input's Limit, when set, is the first page's; each page after asks for twice as many, up to
 * QUERY_WHILE_MAX_PAGE, so a Query that ends within its first page reads little past its end and
 * a long one still takes few pages.
 */
export async function queryWhile(
  client: AwsClient,
  input: QueryCommandInput,
  keep: (item: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  try {
    let start: QueryCommandInput["ExclusiveStartKey"];
    let limit = input.Limit;
    do {
      const page = await client.send(
        Query({ ...input, ExclusiveStartKey: start, ...(limit ? { Limit: limit } : {}) }),
      );
      for (const raw of page.Items ?? []) {
        const item = unmarshall(raw);
        if (!keep(item)) return items;
        items.push(item);
      }
      start = page.LastEvaluatedKey;
      if (limit) limit = Math.min(limit * 2, QUERY_WHILE_MAX_PAGE);
    } while (start);
  } catch (error) {
    throw dynamoFailure(error, "Query");
  }
  return items;
}

/**
 * Whether a Query failed because the table has no such index (yet): DynamoDB's ValidationException
 * "The table does not have the specified index", or moto's "Invalid index" (a ResourceNotFound
 * there), as the SDK threw it or as `queryAll` wrapped it (its cause). A stack that is upgrading
 * its indexes (lib/infra/README.md) is read through the legacy ones until the new ones exist.
 */
export function missingIndex(error: unknown): boolean {
  const { name, message, cause } = (error ?? {}) as {
    name?: unknown;
    message?: unknown;
    cause?: unknown;
  };
  if (
    (name === "ValidationException" || name === "ResourceNotFoundException") &&
    /specified index|invalid index/i.test(String(message))
  )
    return true;
  return cause !== undefined && cause !== error && missingIndex(cause);
}

/**
 * One BatchGetItem for keys (attribute `pk`) across tables (at most 100), retrying
 * UnprocessedKeys with jittered backoff, as AWS asks: BatchGetItem may return part of the result
 * under load. Items come back by table name, unmarshalled.
 */
export async function batchGetByPk(
  client: AwsClient,
  keys: readonly { table: string; pk: string }[],
  consistent: boolean,
  options: BatchGetOptions = {},
): Promise<Map<string, Record<string, unknown>[]>> {
  const pending: Record<string, KeysAndAttributes> = {};
  for (const { table, pk } of keys) {
    const entry = pending[table] ?? { Keys: [], ConsistentRead: consistent };
    entry.Keys?.push({ pk: { S: pk } });
    pending[table] = entry;
  }
  return batchGetRounds(client, pending, consistent, options);
}

/**
 * The items of one table under any number of keys (whole primary keys, marshalled), unmarshalled,
 * in calls of at most 100 keys, each retried for its UnprocessedKeys like `batchGetByPk`. Keys
 * that find nothing are left out.
 */
export async function batchGetItems(
  client: AwsClient,
  table: string,
  keys: readonly Record<string, AttributeValue>[],
  options: BatchGetOptions & {
    readonly consistent?: boolean;
    /** Only these attributes of each item (names, not expressions). */
    readonly attributes?: readonly string[];
  } = {},
): Promise<Record<string, unknown>[]> {
  const consistent = options.consistent ?? false;
  const projection = options.attributes && {
    ProjectionExpression: options.attributes.map((_, i) => `#a${i}`).join(", "),
    ExpressionAttributeNames: Object.fromEntries(options.attributes.map((a, i) => [`#a${i}`, a])),
  };
  const items: Record<string, unknown>[] = [];
  for (let i = 0; i < keys.length; i += MAX_BATCH_GET_KEYS) {
    const chunk = keys.slice(i, i + MAX_BATCH_GET_KEYS);
    const request = { [table]: { Keys: [...chunk], ConsistentRead: consistent, ...projection } };
    const found = await batchGetRounds(client, request, consistent, options);
    items.push(...(found.get(table) ?? []));
  }
  return items;
}

/** BatchGetItem rounds until no key is left unprocessed (TransientError after `maxAttempts`). */
async function batchGetRounds(
  client: AwsClient,
  request: Record<string, KeysAndAttributes>,
  consistent: boolean,
  options: BatchGetOptions,
): Promise<Map<string, Record<string, unknown>[]>> {
  const maxAttempts = options.maxAttempts ?? 6;
  const found = new Map<string, Record<string, unknown>[]>();
  let pending = request;
  for (let attempt = 1; Object.keys(pending).length > 0; attempt++) {
    let output: BatchGetItemCommandOutput;
    try {
      output = await client.send(BatchGetItem({ RequestItems: pending }));
    } catch (error) {
      throw dynamoFailure(error, "BatchGetItem");
    }
    for (const [table, items] of Object.entries(output.Responses ?? {})) {
      const list = found.get(table) ?? [];
      for (const item of items) list.push(unmarshall(item));
      found.set(table, list);
    }
    pending = unprocessedOf(output, consistent);
    if (Object.keys(pending).length === 0) break;
    if (attempt >= maxAttempts) {
      throw new TransientError(
        "dynamodb.unprocessed_keys",
        `BatchGetItem left keys unprocessed after ${attempt} attempts`,
      );
    }
    await (options.wait ?? sleep)(backoff(attempt));
  }
  return found;
}

function unprocessedOf(
  output: BatchGetItemCommandOutput,
  consistent: boolean,
): Record<string, KeysAndAttributes> {
  const unprocessed: Record<string, KeysAndAttributes> = {};
  for (const [table, entry] of Object.entries(output.UnprocessedKeys ?? {})) {
    if (entry.Keys && entry.Keys.length > 0)
      unprocessed[table] = { Keys: entry.Keys, ConsistentRead: consistent };
  }
  return unprocessed;
}
