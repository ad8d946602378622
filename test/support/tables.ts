import {
  type AttributeDefinition,
  CreateTableCommand,
  DeleteTableCommand,
  type DynamoDBClient,
  type GlobalSecondaryIndex,
  type KeySchemaElement,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import {
  type KeyAttribute,
  LEGACY_EVENT_TRACE_INDEXES,
  LEGACY_INBOX_TRACE_INDEXES,
  LEGACY_STATE_INDEXES,
  TABLES,
  type TableLayout,
} from "../../functions/adapters/dynamodb/layouts";
import {
  EVENT_TRACE_INDEXES,
  StateIndex,
  type TableNames,
} from "../../functions/adapters/dynamodb/tables";

/**
 * Create the four AgentBus tables from the layout in functions/adapters/dynamodb/tables.ts, named
 * `${prefix}-state`, `${prefix}-events`, `${prefix}-inbox`, `${prefix}-side-effects` (give every
 * test file its own prefix). On-demand billing, stream NEW_IMAGE on events, TTL on the inbox.
 */
export async function createTables(client: DynamoDBClient, prefix: string): Promise<TableNames> {
  const names: TableNames = {
    state: `${prefix}-state`,
    events: `${prefix}-events`,
    inbox: `${prefix}-inbox`,
    sideEffects: `${prefix}-side-effects`,
  };
  // The four of TableNames: TABLES also has the payments stand-in's layout, which is no AgentBus table.
  for (const kind of Object.keys(names) as (keyof TableNames)[]) {
    const name = names[kind];
    const layout: TableLayout = TABLES[kind];
    await client.send(new CreateTableCommand(createTableInput(name, layout)));
    await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: name });
    if (layout.ttlAttribute) {
      await client.send(
        new UpdateTimeToLiveCommand({
          TableName: name,
          TimeToLiveSpecification: { AttributeName: layout.ttlAttribute, Enabled: true },
        }),
      );
    }
  }
  return names;
}

/**
 * A table keyed by `pk` alone with a NEW_IMAGE stream, named `name`, created and ready: what a
 * test of stream reading writes to. Returns its stream's ARN.
 */
export async function createStreamTable(client: DynamoDBClient, name: string): Promise<string> {
  const created = await client.send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: "PAY_PER_REQUEST",
      KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
      StreamSpecification: { StreamEnabled: true, StreamViewType: "NEW_IMAGE" },
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: name });
  return created.TableDescription?.LatestStreamArn ?? "";
}

export async function deleteTables(client: DynamoDBClient, names: TableNames): Promise<void> {
  for (const name of Object.values(names)) {
    await client.send(new DeleteTableCommand({ TableName: name })).catch(() => undefined);
  }
}

/**
 * The state table as stacks deployed it before the operator's lists were keyed by listing time:
 * by-due and the legacy list indexes (LEGACY_STATE_INDEXES).
 */
export const LEGACY_STATE_LAYOUT: TableLayout = {
  ...TABLES.state,
  indexes: [
    ...TABLES.state.indexes.filter((i) => i.name === StateIndex.byDue),
    ...LEGACY_STATE_INDEXES,
  ],
};

/**
 * The indexes of a table but its trace indexes (the events table's by-stream-type): by-event-id
 * and the digest indexes came after task roots.
 */
const notTrace = (layout: TableLayout) =>
  (layout.indexes ?? []).filter((i) => !EVENT_TRACE_INDEXES.includes(i.name));

/**
 * The events and inbox tables as stacks deployed them before task roots: the legacy trace indexes
 * by-correlation and by-task, projecting all, and the events table's by-hour
 * (LEGACY_EVENT_TRACE_INDEXES), and the others.
 */
export const LEGACY_EVENTS_LAYOUT: TableLayout = {
  ...TABLES.events,
  indexes: [...LEGACY_EVENT_TRACE_INDEXES, ...notTrace(TABLES.events)],
};
export const LEGACY_INBOX_LAYOUT: TableLayout = {
  ...TABLES.inbox,
  indexes: [...LEGACY_INBOX_TRACE_INDEXES, ...notTrace(TABLES.inbox)],
};

/** The CreateTable input of a table with this layout (on-demand billing). */
export function createTableInput(name: string, layout: TableLayout) {
  const attributes = new Map<string, AttributeDefinition>();
  const keySchema = (partition: KeyAttribute, sort?: KeyAttribute): KeySchemaElement[] => {
    const keys: KeySchemaElement[] = [{ AttributeName: partition.name, KeyType: "HASH" }];
    attributes.set(partition.name, {
      AttributeName: partition.name,
      AttributeType: partition.type,
    });
    if (sort) {
      keys.push({ AttributeName: sort.name, KeyType: "RANGE" });
      attributes.set(sort.name, { AttributeName: sort.name, AttributeType: sort.type });
    }
    return keys;
  };
  const KeySchema = keySchema(layout.partitionKey, layout.sortKey);
  const indexes: GlobalSecondaryIndex[] = (layout.indexes ?? []).map((index) => ({
    IndexName: index.name,
    KeySchema: keySchema(index.partitionKey, index.sortKey),
    Projection:
      typeof index.projection === "string"
        ? { ProjectionType: index.projection }
        : { ProjectionType: "INCLUDE" as const, NonKeyAttributes: [...index.projection.include] },
  }));
  return {
    TableName: name,
    BillingMode: "PAY_PER_REQUEST" as const,
    KeySchema,
    AttributeDefinitions: [...attributes.values()],
    ...(indexes.length > 0 ? { GlobalSecondaryIndexes: indexes } : {}),
    ...(layout.stream
      ? { StreamSpecification: { StreamEnabled: true, StreamViewType: layout.stream } }
      : {}),
  };
}
