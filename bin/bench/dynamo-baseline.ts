import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import {
  CreateTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { Context } from "aws-lambda";
import {
  eventItem,
  type StateItem,
  stateItem,
  storedStateOf,
} from "../../functions/adapters/dynamodb/items";
import { streamKey, type TableNames } from "../../functions/adapters/dynamodb/tables";
import { buildEmitted } from "../../functions/core/emit";
import type { ConsumerDeps, StoredState } from "../../functions/core/ports";
import type { Role, StepStatus } from "../../functions/core/role";
import { type AggregateRef, type Envelope, registry } from "../../schemas";

/**
 * The baseline design of the DynamoDB section: Powertools idempotency (keyed by event id) around
 * a function that reads the state (GetItem), decides with the same role, writes the state with a
 * revision condition (PutItem) and writes each emitted event to the events table (a separate
 * PutItem: the outbox row is not atomic with the state write). No order gate.
 */

/** Inbox rows and idempotency records are kept equally long in both designs. */
const RETENTION_SECONDS = 7 * 24 * 3600;

/** Where the baseline keeps its state, its events and its idempotency records. */
export interface BaselineTarget {
  readonly client: DynamoDBClient;
  readonly tables: TableNames;
  readonly idempotencyTable: string;
  readonly deps: ConsumerDeps;
}

interface BaselineStep {
  readonly status: StepStatus;
  readonly emitted: number;
}

export interface BaselineConsumer {
  /** Validates like the pipeline does, then runs the idempotent function. */
  handle(raw: unknown): Promise<BaselineStep>;
  /** How many times the function itself ran (not answered from an idempotency record). */
  invocations(): number;
}

/** The Powertools idempotency table: partition key `id` (S), TTL attribute `expiration`. */
export async function createIdempotencyTable(client: DynamoDBClient, name: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: "PAY_PER_REQUEST",
      KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: name });
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: name,
      TimeToLiveSpecification: { AttributeName: "expiration", Enabled: true },
    }),
  );
}

/** The baseline consumer of a role: `applyOnce` behind Powertools' makeIdempotent. */
export function powertoolsConsumer<S>(role: Role<S>, target: BaselineTarget): BaselineConsumer {
  const config = new IdempotencyConfig({
    eventKeyJmesPath: "event_id",
    expiresAfterSeconds: RETENTION_SECONDS,
  });
  // What a Lambda handler does once per invocation; it also bounds the in-progress lock.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as unknown as Context);
  const persistenceStore = new DynamoDBPersistenceLayer({
    tableName: target.idempotencyTable,
    awsSdkV3Client: target.client,
  });
  let invocations = 0;
  const apply = (event: Envelope): Promise<BaselineStep> => {
    invocations++;
    return applyOnce(role, target, event);
  };
  const idempotent = makeIdempotent(apply, { persistenceStore, config, keyPrefix: role.group });
  return {
    handle: async (raw) => {
      const parsed = registry.parse(raw);
      if (!parsed.ok) throw new Error(`baseline got an invalid envelope: ${parsed.message}`);
      return idempotent(parsed.envelope);
    },
    invocations: () => invocations,
  };
}

/** The stored state of an aggregate: one strongly consistent GetItem of its state item. */
export async function readState(
  client: DynamoDBClient,
  table: string,
  ref: AggregateRef,
): Promise<StoredState | undefined> {
  const got = await client.send(
    new GetItemCommand({
      TableName: table,
      Key: { pk: { S: streamKey(ref) } },
      ConsistentRead: true,
    }),
  );
  return got.Item ? storedStateOf(unmarshall(got.Item) as StateItem) : undefined;
}

/** Read, decide, write the state, then write each emitted event: no idempotency of its own. */
async function applyOnce<S>(
  role: Role<S>,
  { client, tables, deps }: BaselineTarget,
  event: Envelope,
): Promise<BaselineStep> {
  const ref: AggregateRef = role.stateOf?.(event) ?? {
    type: event.aggregate.type,
    id: event.aggregate.id,
  };
  const stored = (await readState(client, tables.state, ref)) as StoredState<S> | undefined;
  const now = deps.clock.now();
  const decision = await role.decide(stored?.data, event, {
    now,
    receiveCount: 1,
    stored,
    repaired: false,
  });
  const head = stored?.version ?? 0;
  // Each benchmark event is delivered once: its first processing attempt.
  const origin = { producer: role.group, now, attempt: 1 };
  const emitted = buildEmitted(decision.emit ?? [], event, ref, head, origin, deps);
  const revision = stored?.revision ?? 0;
  const next = decision.state !== undefined ? decision.state : (stored?.data ?? null);
  const item = stateItem(ref, revision + 1, head + emitted.length, next, now);
  await client.send(
    new PutItemCommand({
      TableName: tables.state,
      Item: marshall(item, { removeUndefinedValues: true }),
      ...(revision === 0
        ? {
            ConditionExpression: "attribute_not_exists(#pk)",
            ExpressionAttributeNames: { "#pk": "pk" },
          }
        : {
            ConditionExpression: "#r = :r",
            ExpressionAttributeNames: { "#r": "revision" },
            ExpressionAttributeValues: { ":r": { N: String(revision) } },
          }),
    }),
  );
  for (const e of emitted) {
    await client.send(
      new PutItemCommand({
        TableName: tables.events,
        Item: marshall(eventItem(e), { removeUndefinedValues: true }),
        ConditionExpression: "attribute_not_exists(#pk)",
        ExpressionAttributeNames: { "#pk": "pk" },
      }),
    );
  }
  return { status: "applied", emitted: emitted.length };
}
