import type {
  BatchGetItemCommandOutput,
  KeysAndAttributes,
  QueryCommandOutput,
} from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import type { AggregateRef } from "../../../schemas";
import { backoff, sleep } from "../../core/batching";
import { TransientError } from "../../core/errors";
import type { DueReader, StateReader, StoredState } from "../../core/ports";
import type { AwsClient } from "../aws/client";
import { BatchGetItem, Query } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { aggregateOfKey, type StateItem, storedStateOf } from "./items";
import { MAX_BATCH_GET_KEYS } from "./reads";
import { DUE_SHARD, StateAttr, StateIndex, streamKey } from "./tables";

export interface DynamoDueIndexOptions {
  readonly client: AwsClient;
  /** The state table (its by-due index is queried). */
  readonly stateTable: string;
  /** Rounds of BatchGetItem for UnprocessedKeys before giving up with a TransientError. */
  readonly maxBatchGetAttempts?: number;
  readonly wait?: (ms: number) => Promise<void>;
}

/**
 * The due index on DynamoDB: a Query on the state table's sparse `by-due` GSI (partition
 * `due_shard = "due"`, `due_at <= now`, earliest first) and eventually consistent BatchGetItem
 * reads of the due states. The index is KEYS_ONLY: the aggregate comes from the item's `pk`.
 * Index reads are eventually consistent, so a caller must re-check what it reads (the sweeper
 * plans from the loaded states, not from the index).
 */
export class DynamoDueIndex implements DueReader, StateReader {
  private readonly client: AwsClient;
  private readonly table: string;
  private readonly maxBatchGetAttempts: number;
  private readonly wait: (ms: number) => Promise<void>;

  constructor(options: DynamoDueIndexOptions) {
    this.client = options.client;
    this.table = options.stateTable;
    this.maxBatchGetAttempts = options.maxBatchGetAttempts ?? 6;
    this.wait = options.wait ?? sleep;
  }

  async due(now: Date, limit: number): Promise<AggregateRef[]> {
    const refs: AggregateRef[] = [];
    let start: QueryCommandOutput["LastEvaluatedKey"];
    while (refs.length < limit) {
      let page: QueryCommandOutput;
      try {
        page = await this.client.send(
          Query({
            TableName: this.table,
            IndexName: StateIndex.byDue,
            KeyConditionExpression: "#shard = :shard AND #due <= :now",
            ExpressionAttributeNames: { "#shard": StateAttr.dueShard, "#due": StateAttr.dueAt },
            ExpressionAttributeValues: {
              ":shard": { S: DUE_SHARD },
              ":now": { S: now.toISOString() },
            },
            ScanIndexForward: true,
            Limit: limit - refs.length,
            ExclusiveStartKey: start,
          }),
        );
      } catch (error) {
        throw dynamoFailure(error, "Query");
      }
      for (const item of page.Items ?? []) {
        const pk = item[StateAttr.pk]?.S;
        if (pk) refs.push(aggregateOfKey(pk));
      }
      start = page.LastEvaluatedKey;
      if (!start) break;
    }
    return refs.slice(0, limit);
  }

  async loadStates(refs: readonly AggregateRef[]): Promise<StoredState[]> {
    const keys = [...new Set(refs.map(streamKey))];
    const found: StoredState[] = [];
    for (let i = 0; i < keys.length; i += MAX_BATCH_GET_KEYS) {
      let pending: KeysAndAttributes | undefined = {
        Keys: keys.slice(i, i + MAX_BATCH_GET_KEYS).map((pk) => ({ pk: { S: pk } })),
      };
      for (let attempt = 1; pending?.Keys?.length; attempt++) {
        let output: BatchGetItemCommandOutput;
        try {
          output = await this.client.send(
            BatchGetItem({ RequestItems: { [this.table]: pending } }),
          );
        } catch (error) {
          throw dynamoFailure(error, "BatchGetItem");
        }
        for (const raw of output.Responses?.[this.table] ?? []) {
          found.push(storedStateOf(unmarshall(raw) as StateItem));
        }
        pending = output.UnprocessedKeys?.[this.table];
        if (!pending?.Keys?.length) break;
        if (attempt >= this.maxBatchGetAttempts)
          throw new TransientError(
            "dynamodb.unprocessed_keys",
            `BatchGetItem left keys unprocessed after ${attempt} attempts`,
          );
        await this.wait(backoff(attempt));
      }
    }
    const order = new Map(refs.map((ref, index) => [streamKey(ref), index]));
    return found.sort(
      (a, b) => (order.get(streamKey(a.aggregate)) ?? 0) - (order.get(streamKey(b.aggregate)) ?? 0),
    );
  }
}
