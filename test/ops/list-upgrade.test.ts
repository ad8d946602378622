import {
  CreateTableCommand,
  DynamoDBClient,
  PutItemCommand,
  UpdateTableCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { type IndexLayout, TABLES } from "../../functions/adapters/dynamodb/layouts";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { listingAfter } from "../../functions/core/listing";
import type { StateSummary } from "../../functions/core/ports";
import { ManualClock } from "../../functions/core/runtime";
import { type ListIndexUpgrade, stateIndexLayouts } from "../../lib/infra/constructs/tables";
import { fromSdk } from "../../lib/operator/from-sdk";
import { backfillListKeys } from "../../lib/operator/list-backfill";
import { type ListFilter, summaries } from "../../lib/operator/lists";
import type { OpsStack } from "../../lib/operator/stack";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { createTableInput, deleteTables, LEGACY_STATE_LAYOUT } from "../support/tables";

/**
 * The list-index upgrade of lib/infra/README.md, step by step on moto: a state table with the legacy lists and
 * items an older version wrote, then each deploy's one index change (as stateIndexLayouts has
 * it), the backfill, and consumers writing all along; the operator's lists after each step.
 */

let client: DynamoDBClient;
let tables: TableNames;

const stack = () => ({ dynamodb: client, names: { tables } }) as unknown as OpsStack;
const ids = async (by: { kind: string } | { waiting: string }, filter: ListFilter = {}) =>
  (await summaries(stack(), by, 50, filter)).map((r) => r.id);

/** The UpdateTable of a deploy from one index set to the next: one create or one delete. */
async function deploy(from: readonly IndexLayout[], to: readonly IndexLayout[]): Promise<void> {
  const created = to.filter((i) => !from.some((f) => f.name === i.name));
  const deleted = from.filter((f) => !to.some((i) => i.name === f.name));
  expect(created.length + deleted.length).toBe(1);
  const [create] = created;
  const definition = create
    ? createTableInput(tables.state, { partitionKey: TABLES.state.partitionKey, indexes: [create] })
    : undefined;
  await client.send(
    new UpdateTableCommand({
      TableName: tables.state,
      ...(definition
        ? {
            AttributeDefinitions: definition.AttributeDefinitions,
            GlobalSecondaryIndexUpdates: [{ Create: definition.GlobalSecondaryIndexes?.[0] }],
          }
        : { GlobalSecondaryIndexUpdates: [{ Delete: { IndexName: deleted[0]?.name } }] }),
    }),
  );
}

/** The state table's indexes as deployed before the upgrade: by-due and the legacy lists. */
const BEFORE = LEGACY_STATE_LAYOUT.indexes ?? [];

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  const prefix = `upgrade-${newUlid().toLowerCase()}`;
  // Only the state table is written here.
  tables = {
    state: `${prefix}-state`,
    events: `${prefix}-events`,
    inbox: `${prefix}-inbox`,
    sideEffects: `${prefix}-side-effects`,
  };
  await client.send(new CreateTableCommand(createTableInput(tables.state, LEGACY_STATE_LAYOUT)));
});

afterAll(async () => {
  await deleteTables(client, tables);
  client.destroy();
});

describe("the list-index upgrade on moto", () => {
  it("keeps the operator's lists whole at every step, and ends on the current indexes", async () => {
    // Written by the older version: summaries and updated_at, no list keys.
    const old = (id: string, updatedAt: string, waiting?: string) => ({
      pk: `conversation_view#${id}`,
      revision: 1,
      version: 1,
      agg_type: "conversation_view",
      agg_id: id,
      updated_at: updatedAt,
      kind: "conversation",
      status: "open",
      ...(waiting ? { waiting } : {}),
    });
    const oldRun = {
      ...old("oldrun", "2026-11-30T07:00:00.000Z"),
      pk: "dag_run#oldrun",
      agg_type: "dag_run",
      kind: "run",
      status: "RUNNING",
    };
    for (const item of [
      old("old1", "2026-11-30T08:00:00.000Z", "held_reply"),
      old("old2", "2026-11-30T09:00:00.000Z"),
      oldRun,
    ])
      await client.send(new PutItemCommand({ TableName: tables.state, Item: marshall(item) }));
    expect(await ids({ kind: "conversation" })).toEqual(["old2", "old1"]);

    // Stage 1: by-kind-listed, and consumers that write the list keys.
    const layouts = (stage?: ListIndexUpgrade) => stateIndexLayouts(stage);
    await deploy(BEFORE, layouts(1));
    const clock = new ManualClock("2026-12-01T10:00:00.000Z");
    const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
    const summary: StateSummary = { kind: "conversation", status: "open", waiting: "held_reply" };
    await store.commit({
      state: {
        aggregate: { type: "conversation_view", id: "new1" },
        expectedRevision: 0,
        next: {},
        version: 1,
        summary,
        listing: listingAfter(undefined, summary, clock.now()),
      },
    });
    // Until the backfill, the new kind list has only what consumers wrote since; the waiting
    // list is still read from by-waiting.
    expect(await ids({ kind: "conversation" })).toEqual(["new1"]);
    expect(await ids({ waiting: "held_reply" })).toEqual(["new1", "old1"]);

    expect(await backfillListKeys(client, tables.state)).toEqual({
      scanned: 3,
      updated: 3,
      skipped: 0,
    });
    expect(await ids({ kind: "conversation" })).toEqual(["new1", "old2", "old1"]);

    // Stage 2: by-waiting-since, built from the backfilled waiting_since.
    await deploy(layouts(1), layouts(2));
    expect(await ids({ waiting: "held_reply" })).toEqual(["new1", "old1"]);
    const [held] = await summaries(stack(), { waiting: "held_reply" });
    expect(held?.waitingSince).toBe("2026-12-01T10:00:00.000Z");

    // Stages 3 and 4: the legacy indexes go, the lists stay.
    await deploy(layouts(2), layouts(3));
    await deploy(layouts(3), layouts(4));
    expect(await ids({ kind: "conversation" })).toEqual(["new1", "old2", "old1"]);
    // Until the final deploy, one tenant's list of one status is read from by-kind-listed.
    expect(await ids({ kind: "conversation" }, { tenant: "default", status: "open" })).toEqual([
      "new1",
      "old2",
      "old1",
    ]);
    const runningRuns = () => ids({ kind: "run" }, { tenant: "default", status: "RUNNING" });
    expect(await runningRuns()).toEqual(["oldrun"]);
    // The final deploy: by-tenant-status, with the keys the backfill set on runs; a conversation
    // has none, and its tenant's list of one status is still read from by-kind-listed.
    await deploy(layouts(4), layouts());
    expect(await runningRuns()).toEqual(["oldrun"]);
    expect(await ids({ kind: "conversation" })).toEqual(["new1", "old2", "old1"]);
    expect(await ids({ waiting: "held_reply" })).toEqual(["new1", "old1"]);
    expect(await ids({ kind: "conversation" }, { tenant: "default", status: "open" })).toEqual([
      "new1",
      "old2",
      "old1",
    ]);
    expect(await ids({ kind: "conversation" }, { tenant: "acme", status: "open" })).toEqual([]);
    expect((await summaries(stack(), { kind: "conversation" }))[2]).toMatchObject({
      id: "old1",
      listedAt: "2026-11-30T08:00:00.000Z",
      waitingSince: "2026-11-30T08:00:00.000Z",
    });
  });
});
