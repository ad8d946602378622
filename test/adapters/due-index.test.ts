import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoDueIndex } from "../../functions/adapters/dynamodb/due";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { streamKey, type TableNames } from "../../functions/adapters/dynamodb/tables";
import { InMemoryEventStore } from "../../functions/core/memory";
import type { DueReader, EventStore, StateReader } from "../../functions/core/ports";
import { ManualClock } from "../../functions/core/runtime";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { AggregateRef } from "../../schemas";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { createTables, deleteTables } from "../support/tables";

/**
 * The due index (Decision.dueAt -> CommitRequest.state.dueAt): the same cases against the
 * in-memory store and against DynamoDB (the state table's sparse by-due GSI on moto).
 */

let client: DynamoDBClient;
let tables: TableNames;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  tables = await createTables(client, `due-${newUlid().toLowerCase()}`);
});

afterAll(async () => {
  await deleteTables(client, tables);
  client.destroy();
});

interface Subject {
  readonly store: EventStore;
  readonly index: DueReader & StateReader;
}

const subjects: [string, () => Subject][] = [
  [
    "in-memory",
    () => {
      const store = new InMemoryEventStore(new ManualClock("2026-09-01T10:00:00.000Z"));
      return { store, index: store };
    },
  ],
  [
    "DynamoDB",
    () => ({
      store: new DynamoEventStore({
        client: fromSdk(client),
        tables: { state: tables.state, events: tables.events, inbox: tables.inbox },
      }),
      index: new DynamoDueIndex({ client: fromSdk(client), stateTable: tables.state }),
    }),
  ],
];

const run = (): AggregateRef => ({ type: "dag_run", id: `run_${newUlid()}` });

/** Write the next revision of `ref` with a due time. */
async function write(
  store: EventStore,
  ref: AggregateRef,
  revision: number,
  dueAt: string | null | undefined,
) {
  await store.commit({
    state: {
      aggregate: ref,
      expectedRevision: revision,
      next: { n: revision + 1 },
      version: 0,
      ...(dueAt === undefined ? {} : { dueAt }),
    },
  });
}

describe.each(subjects)("due index: %s", (_name, make) => {
  // Far-future times keep these cases apart from other rows in the shared table.
  const base = Date.parse("2091-01-01T00:00:00.000Z") + Math.floor(Math.random() * 1e9) * 1000;
  const at = (seconds: number) => new Date(base + seconds * 1000).toISOString();
  const within = (refs: AggregateRef[], mine: AggregateRef[]) =>
    refs.filter((r) => mine.some((m) => m.id === r.id));

  it("lists the aggregates due at or before now, earliest first, at most limit", async () => {
    const { store, index } = make();
    const [a, b, c] = [run(), run(), run()];
    await write(store, a, 0, at(30));
    await write(store, b, 0, at(10));
    await write(store, c, 0, at(60));
    const mine = [a, b, c];
    expect(within(await index.due(new Date(at(5)), 100), mine)).toEqual([]);
    expect(within(await index.due(new Date(at(30)), 100), mine)).toEqual([b, a]);
    expect(within(await index.due(new Date(at(90)), 100), mine)).toEqual([b, a, c]);
    const limited = await index.due(new Date(at(90)), 1);
    expect(limited).toHaveLength(1);
  });

  it("a write with null or no due time takes the aggregate out; a new due time moves it", async () => {
    const { store, index } = make();
    const [a, b] = [run(), run()];
    await write(store, a, 0, at(10));
    await write(store, b, 0, at(10));
    await write(store, a, 1, null);
    await write(store, b, 1, undefined);
    expect(within(await index.due(new Date(at(100)), 100), [a, b])).toEqual([]);
    await write(store, a, 2, at(50));
    expect(within(await index.due(new Date(at(40)), 100), [a])).toEqual([]);
    expect(within(await index.due(new Date(at(50)), 100), [a])).toEqual([a]);
  });

  it("loadStates reads the states with their due time, missing ones left out", async () => {
    const { store, index } = make();
    const [a, b, missing] = [run(), run(), run()];
    await write(store, a, 0, at(10));
    await write(store, b, 0, null);
    const states = await index.loadStates([b, missing, a]);
    expect(states.map((s) => s.aggregate)).toEqual([b, a]);
    expect(states[0]).toMatchObject({ revision: 1, data: { n: 1 } });
    expect(states[0]?.dueAt).toBeUndefined();
    expect(states[1]?.dueAt).toBe(at(10));
  });
});

describe("the state item on DynamoDB", () => {
  it("carries due_shard and due_at while due, and neither after", async () => {
    const store = new DynamoEventStore({
      client: fromSdk(client),
      tables: { state: tables.state, events: tables.events, inbox: tables.inbox },
    });
    const ref = run();
    const item = async () =>
      unmarshall(
        (
          await client.send(
            new GetItemCommand({
              TableName: tables.state,
              Key: { pk: { S: streamKey(ref) } },
              ConsistentRead: true,
            }),
          )
        ).Item ?? {},
      );
    await write(store, ref, 0, "2091-01-01T00:00:00.000Z");
    expect(await item()).toMatchObject({ due_shard: "due", due_at: "2091-01-01T00:00:00.000Z" });
    await write(store, ref, 1, null);
    const after = await item();
    expect(after.revision).toBe(2);
    expect("due_shard" in after || "due_at" in after).toBe(false);
  });
});
