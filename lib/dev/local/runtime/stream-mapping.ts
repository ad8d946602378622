import {
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type ShardIteratorType,
} from "@aws-sdk/client-dynamodb-streams";
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { DynamoDBRecord } from "aws-lambda";
import type { LocalFunction, LocalMapping } from "../deploy";
import { type Activity, sleep } from "./activity";
import type { Invoke } from "./events";
import type { Faults } from "./faults";
import { selected } from "./filters";
import { toStreamRecord } from "./records";

/** Pause of a stream poller that found no records on any shard (or is held back). */
const STREAM_IDLE_MS = 50;
const STREAM_PAUSED_MS = 100;
/** Pause before a failed stream batch is invoked again. */
const STREAM_RETRY_MS = 200;
/** Retries of a failed stream batch when the mapping sets no MaximumRetryAttempts. */
const DEFAULT_STREAM_RETRIES = 10;

/** What one stream mapping poller works with. */
export interface StreamMappingContext {
  readonly activity: Activity;
  readonly faults: Faults;
  readonly streams: DynamoDBStreamsClient;
  readonly sqs: SQSClient;
  readonly region: string;
  /** The URL of a deployed queue by ARN (the on-failure destination). */
  readonly queueUrl: (arn: string) => string;
}

/** Where the runtime reads a stream shard: its iterator and the last record it has handled. */
export interface ShardPosition {
  iterator?: string;
  /** Sequence number of the last record handled (to reopen the shard after it). */
  after?: string;
  /** The shard has ended (GetRecords gave no next iterator). */
  closed?: boolean;
}

type ShardRead = "records" | "empty" | "stopped";

/**
 * A DynamoDB stream event source mapping: read each shard in order from its starting position,
 * apply the mapping's filter, invoke with BatchSize records; on error retry up to
 * MaximumRetryAttempts, bisecting the batch when BisectBatchOnFunctionError is set, then send the
 * batch's description to the on-failure destination and move on.
 *
 * A failed call is reported and tried again after a pause; a shard whose iterator failed
 * (expired, unknown to a restarted emulator...) is read on from the last record seen
 * (AFTER_SEQUENCE_NUMBER), or from the mapping's starting position if none was.
 */
export class StreamMapping {
  private readonly shards = new Map<string, ShardPosition>();

  constructor(
    private readonly ctx: StreamMappingContext,
    private readonly mapping: LocalMapping,
    private readonly fn: LocalFunction,
    private readonly invoke: Invoke,
  ) {}

  /** Read every shard of the stream until stopped. */
  async run(): Promise<void> {
    const { activity, faults } = this.ctx;
    if (!(await this.discoverShards())) return;
    // Opened at once, so that LATEST means the moment the runtime started (one that cannot be
    // opened now is opened, or its failure reported, in the loop below).
    for (const [shardId, position] of this.shards)
      await this.open(shardId, position).catch(() => undefined);
    while (!activity.stopped) {
      if (faults.streamPaused) {
        // A stream held back is not waited for: idle() only counts what is let through, and a
        // resume (an activity) makes it wait for a read begun after it.
        const now = Date.now();
        for (const shardId of this.shards.keys()) activity.shardReadUp(this.key(shardId), now);
        await sleep(STREAM_PAUSED_MS);
        continue;
      }
      let any = false;
      for (const [shardId, position] of this.shards) {
        if (position.closed) continue;
        const read = await this.readShard(shardId, position);
        if (read === "stopped") return;
        if (read === "records") any = true;
      }
      if (!any) await sleep(STREAM_IDLE_MS);
    }
  }

  /**
   * A shard as this mapping reads it, as the runtime's activity knows it: shard ids repeat across
   * streams, and two mappings read one stream (the relay's and a stream-delivered group's), each
   * behind or read up on its own.
   */
  private key(shardId: string): string {
    return `${this.mapping.logicalId}#${this.mapping.eventSourceArn}#${shardId}`;
  }

  /** The stream's shards, asked for until the emulator answers; false if stopped meanwhile. */
  private async discoverShards(): Promise<boolean> {
    const { activity, streams } = this.ctx;
    while (!activity.stopped) {
      try {
        const description = await streams.send(
          new DescribeStreamCommand({ StreamArn: this.mapping.eventSourceArn }),
        );
        for (const shard of description.StreamDescription?.Shards ?? [])
          if (shard.ShardId && !this.shards.has(shard.ShardId)) {
            this.shards.set(shard.ShardId, {});
            activity.shardOpened(this.key(shard.ShardId));
          }
        return true;
      } catch (error) {
        if (activity.stopped) return false;
        await activity.failed(this.fn.name, "DescribeStream", error);
      }
    }
    return true;
  }

  /** Open a shard after the last record handled, or at the mapping's starting position. */
  private async open(shardId: string, position: ShardPosition): Promise<void> {
    const { ShardIterator } = await this.ctx.streams.send(
      new GetShardIteratorCommand({
        StreamArn: this.mapping.eventSourceArn,
        ShardId: shardId,
        ...(position.after
          ? { ShardIteratorType: "AFTER_SEQUENCE_NUMBER", SequenceNumber: position.after }
          : { ShardIteratorType: startingPosition(this.mapping) }),
      }),
    );
    position.iterator = ShardIterator;
  }

  /** One page of a shard, handled; a failed call drops the iterator to reopen it next time. */
  private async readShard(shardId: string, position: ShardPosition): Promise<ShardRead> {
    const { activity } = this.ctx;
    let call = "GetShardIterator";
    let read: ShardRead = "empty";
    const startedAt = Date.now();
    try {
      if (!position.iterator) await this.open(shardId, position);
      call = "GetRecords";
      const records = await this.nextPage(position);
      if (position.closed) activity.shardReadUp(this.key(shardId), Infinity);
      if (records.length === 0) {
        activity.streamBehind.delete(this.key(shardId));
        if (!position.closed) activity.shardReadUp(this.key(shardId), startedAt);
        return read;
      }
      read = "records";
      activity.streamBehind.add(this.key(shardId));
      const batch = await this.gathered(records, position);
      await activity.track(() => this.handle(batch, shardId));
      position.after = batch.at(-1)?.dynamodb?.SequenceNumber ?? position.after;
      return read;
    } catch (error) {
      if (activity.stopped) return "stopped";
      position.iterator = undefined;
      position.closed = false;
      await activity.failed(this.fn.name, call, error);
      return read;
    }
  }

  /**
   * `records` and what the shard brings within the mapping's batching window, counted from their
   * read, until the batch is full (its filtered records), as Lambda gathers a stream batch.
   */
  private async gathered(
    records: DynamoDBRecord[],
    position: ShardPosition,
  ): Promise<DynamoDBRecord[]> {
    const windowMs = (this.mapping.maximumBatchingWindowSeconds ?? 0) * 1000;
    const until = Date.now() + windowMs;
    const { batchSize, filters } = this.mapping;
    const batch = [...records];
    while (!position.closed && !this.ctx.activity.stopped && Date.now() < until) {
      const room = batchSize - selected(batch, filters).length;
      if (room <= 0) break;
      await sleep(Math.min(STREAM_IDLE_MS, until - Date.now()));
      batch.push(...(await this.nextPage(position, room)));
    }
    return batch;
  }

  private async nextPage(
    position: ShardPosition,
    limit = this.mapping.batchSize,
  ): Promise<DynamoDBRecord[]> {
    const page = await this.ctx.streams.send(
      new GetRecordsCommand({
        ShardIterator: position.iterator,
        Limit: Math.min(limit, 1000),
      }),
    );
    position.iterator = page.NextShardIterator;
    position.closed = !page.NextShardIterator;
    return (page.Records ?? []).map((r) =>
      toStreamRecord(r, this.mapping.eventSourceArn, this.ctx.region),
    );
  }

  private async handle(records: DynamoDBRecord[], shardId: string): Promise<void> {
    const batch = selected(records, this.mapping.filters);
    if (batch.length > 0) await this.invokeBatch(batch, this.retries(), shardId);
  }

  private retries(): number {
    return this.mapping.maximumRetryAttempts ?? DEFAULT_STREAM_RETRIES;
  }

  /** Invoke; on error retry (bisecting if the mapping says so) until the retries run out. */
  private async invokeBatch(
    records: DynamoDBRecord[],
    retriesLeft: number,
    shardId: string,
  ): Promise<void> {
    const invocation = {
      function: this.fn.name,
      kind: this.fn.kind,
      group: this.fn.group ?? this.fn.name,
      attempt: this.retries() - retriesLeft + 1,
      messageIds: [],
    };
    try {
      await this.ctx.faults.invoke(invocation, () => this.invoke({ Records: records }));
      return;
    } catch (error) {
      this.ctx.activity.report({
        kind: "invocation-failed",
        function: this.fn.name,
        error: String(error),
      });
    }
    if (retriesLeft <= 0) return this.giveUp(records, shardId);
    await sleep(STREAM_RETRY_MS);
    if (this.mapping.bisectBatchOnFunctionError && records.length > 1) {
      const half = Math.ceil(records.length / 2);
      await this.invokeBatch(records.slice(0, half), retriesLeft - 1, shardId);
      await this.invokeBatch(records.slice(half), retriesLeft - 1, shardId);
    } else {
      await this.invokeBatch(records, retriesLeft - 1, shardId);
    }
  }

  /** Drop the batch, describing it to the on-failure destination if the mapping has one. */
  private async giveUp(records: DynamoDBRecord[], shardId: string): Promise<void> {
    const { activity, sqs } = this.ctx;
    activity.report({
      kind: "stream-batch-dropped",
      function: this.fn.name,
      records: records.length,
    });
    if (!this.mapping.onFailureArn) return;
    try {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: this.ctx.queueUrl(this.mapping.onFailureArn),
          MessageBody: JSON.stringify(onFailureRecord(this.mapping, this.fn, records, shardId)),
        }),
      );
    } catch (error) {
      // The batch is given up on all the same; its description is only in this report.
      activity.report({
        kind: "invocation-failed",
        function: this.fn.name,
        error: `on-failure destination: ${String(error)}`,
      });
    }
  }
}

function startingPosition(mapping: LocalMapping): ShardIteratorType {
  return mapping.startingPosition === "LATEST" ? "LATEST" : "TRIM_HORIZON";
}

/** What Lambda sends an on-failure destination for a stream batch whose retries ran out. */
export function onFailureRecord(
  mapping: LocalMapping,
  fn: LocalFunction,
  records: readonly DynamoDBRecord[],
  shardId: string,
): unknown {
  return {
    requestContext: { functionArn: fn.name, condition: "RetryAttemptsExhausted" },
    DDBStreamBatchInfo: {
      shardId,
      startSequenceNumber: records[0]?.dynamodb?.SequenceNumber,
      endSequenceNumber: records.at(-1)?.dynamodb?.SequenceNumber,
      batchSize: records.length,
      streamArn: mapping.eventSourceArn,
    },
  };
}
