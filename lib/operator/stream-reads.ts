import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from "@aws-sdk/client-dynamodb-streams";
import { batchGetItems } from "../../functions/adapters/dynamodb/reads";
import { EventAttr } from "../../functions/adapters/dynamodb/tables";
import { fromSdk } from "./from-sdk";
import type { OpsStack } from "./stack";

/**
 * The stored events an operator republishes or replays, found in the events table's stream rather
 * than in an index of the table: every stored event passes through it once, and it costs no write.
 * DynamoDB keeps a stream's records 24 hours; what is older cannot be read here.
 */

/** How long DynamoDB keeps a stream's records. */
export const STREAM_RETENTION_HOURS = 24;

/** The key of a stored event (stream, version) and when it occurred (UTC, ISO 8601). */
export interface StreamEventKey {
  readonly pk: string;
  readonly version: number;
  readonly at: string;
}

/** Where a batch the relay gave up on sat in the stream (the event source's on-failure record). */
export interface StreamPositions {
  readonly streamArn?: string;
  readonly shardId: string;
  readonly startSequenceNumber: string;
  readonly endSequenceNumber: string;
}

/** A stream position or window that is past what the stream keeps. */
export class StreamExpired extends Error {
  constructor(what: string, cause?: unknown) {
    super(
      `${what}: the events table's stream keeps ${STREAM_RETENTION_HOURS} hours, and these records are no longer in it`,
      { cause },
    );
    this.name = "StreamExpired";
  }
}

/** Consecutive empty pages after which an open shard is taken as read to its end. */
const EMPTY_PAGES = 3;

/** The keys of the events stored in the window (by occurred_at), oldest first. */
export async function keysInStreamWindow(
  stack: OpsStack,
  from: Date,
  to: Date,
): Promise<StreamEventKey[]> {
  const client = new DynamoDBStreamsClient(stack.config);
  try {
    const streamArn = await eventsStreamArn(stack);
    const keys: StreamEventKey[] = [];
    for (const shardId of await shardsOf(client, streamArn)) {
      const iterator = await client.send(
        new GetShardIteratorCommand({
          StreamArn: streamArn,
          ShardId: shardId,
          ShardIteratorType: "TRIM_HORIZON",
        }),
      );
      for (const key of await readShard(client, iterator.ShardIterator)) {
        const at = Date.parse(key.at);
        if (at >= from.getTime() && at <= to.getTime()) keys.push(key);
      }
    }
    return sortedByTime(keys);
  } finally {
    client.destroy();
  }
}

/** The keys of the events a batch's stream positions hold (inserts), in stream order. */
export async function keysAtPositions(
  stack: OpsStack,
  positions: StreamPositions,
): Promise<StreamEventKey[]> {
  const client = new DynamoDBStreamsClient(stack.config);
  const what = `stream positions ${positions.startSequenceNumber}..${positions.endSequenceNumber} of ${positions.shardId}`;
  try {
    const streamArn = positions.streamArn ?? (await eventsStreamArn(stack));
    let iterator: string | undefined;
    try {
      const found = await client.send(
        new GetShardIteratorCommand({
          StreamArn: streamArn,
          ShardId: positions.shardId,
          ShardIteratorType: "AT_SEQUENCE_NUMBER",
          SequenceNumber: positions.startSequenceNumber,
        }),
      );
      iterator = found.ShardIterator;
    } catch (error) {
      if (expired(error)) throw new StreamExpired(what, error);
      throw error;
    }
    const end = BigInt(positions.endSequenceNumber);
    return await readShard(client, iterator, (sequence) => sequence <= end);
  } finally {
    client.destroy();
  }
}

/** The events table's current stream (DescribeTable). */
async function eventsStreamArn(stack: OpsStack): Promise<string> {
  const { Table } = await stack.dynamodb.send(
    new DescribeTableCommand({ TableName: stack.names.tables.events }),
  );
  if (!Table?.LatestStreamArn)
    throw new Error(`the events table ${stack.names.tables.events} has no stream`);
  return Table.LatestStreamArn;
}

async function shardsOf(client: DynamoDBStreamsClient, streamArn: string): Promise<string[]> {
  const shards: string[] = [];
  let start: string | undefined;
  do {
    const { StreamDescription } = await client.send(
      new DescribeStreamCommand({ StreamArn: streamArn, ExclusiveStartShardId: start }),
    );
    for (const shard of StreamDescription?.Shards ?? [])
      if (shard.ShardId) shards.push(shard.ShardId);
    start = StreamDescription?.LastEvaluatedShardId;
  } while (start);
  return shards;
}

/**
 * The inserted events' keys of a shard from an iterator on, while `within` holds for the records'
 * sequence numbers (to the shard's end, or its newest record when it is open).
 */
async function readShard(
  client: DynamoDBStreamsClient,
  start: string | undefined,
  within: (sequence: bigint) => boolean = () => true,
): Promise<StreamEventKey[]> {
  const keys: StreamEventKey[] = [];
  let iterator = start;
  for (let empty = 0; iterator && empty < EMPTY_PAGES; ) {
    let page: { Records?: _Record[]; NextShardIterator?: string };
    try {
      page = await client.send(new GetRecordsCommand({ ShardIterator: iterator }));
    } catch (error) {
      if (expired(error)) throw new StreamExpired("the stream records asked for", error);
      throw error;
    }
    const records = page.Records ?? [];
    empty = records.length === 0 ? empty + 1 : 0;
    for (const record of records) {
      if (!within(BigInt(record.dynamodb?.SequenceNumber ?? "0"))) return keys;
      const key = keyOf(record);
      if (key) keys.push(key);
    }
    iterator = page.NextShardIterator;
  }
  return keys;
}

/** An inserted event's key and time, from its stream record's new image. */
function keyOf(record: _Record): StreamEventKey | undefined {
  const image = record.dynamodb?.NewImage;
  if (record.eventName !== "INSERT" || !image) return undefined;
  const pk = image[EventAttr.pk]?.S;
  const version = image[EventAttr.version]?.N;
  const occurred = Date.parse(image[EventAttr.occurredAt]?.S ?? "");
  if (pk === undefined || version === undefined || Number.isNaN(occurred)) return undefined;
  return { pk, version: Number(version), at: new Date(occurred).toISOString() };
}

function sortedByTime(keys: StreamEventKey[]): StreamEventKey[] {
  return keys.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.version - b.version));
}

/** DynamoDB Streams' answer to a position it no longer keeps (or never had). */
function expired(error: unknown): boolean {
  const name = (error as { name?: unknown } | undefined)?.name;
  return name === "TrimmedDataAccessException" || name === "ExpiredIteratorException";
}

/**
 * The stored events at these keys, unmarshalled (only `attributes` when given): BatchGetItem in
 * calls of 100 keys, unprocessed keys retried with backoff (TransientError when some stay left).
 * A key that finds nothing is left out.
 */
export async function storedEventItems(
  stack: OpsStack,
  keys: readonly { pk: string; version: number }[],
  attributes?: readonly string[],
): Promise<Record<string, unknown>[]> {
  return batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.events,
    keys.map((k) => ({
      [EventAttr.pk]: { S: k.pk },
      [EventAttr.version]: { N: String(k.version) },
    })),
    attributes ? { attributes } : {},
  );
}
