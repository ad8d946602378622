import {
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { StateAttr, StateIndex, type TableNames } from "../../functions/adapters/dynamodb/tables";
import {
  type BackfillItem,
  backfillItem,
  backfillItemOf,
  backfillListKeys,
  type ListBackfillCounts,
} from "../../lib/operator/list-backfill";
import { emulator } from "../support/aws";
import { runCli } from "../support/cli";
import { newUlid } from "../support/factories";
import { createTables, deleteTables } from "../support/tables";

/**
 * `agentbus lists backfill` against moto: summarized state items an older version wrote (kind,
 * maybe waiting, updated_at, no listed_at / waiting_since) get their list keys from updated_at.
 */

let client: DynamoDBClient;
let tables: TableNames;

beforeAll(() => {
  client = new DynamoDBClient(emulator());
});

afterAll(() => {
  client.destroy();
});

beforeEach(async () => {
  tables = await createTables(client, `lists-${newUlid().toLowerCase()}`);
});

afterEach(async () => {
  await deleteTables(client, tables);
});

const T1 = "2025-03-01T10:00:00.000Z";
const T2 = "2025-03-02T11:00:00.000Z";
const T3 = "2025-03-03T12:00:00.000Z";
const LISTED = "2025-01-01T00:00:00.000Z";

/** A state item as the table holds it; `summary` adds what a summarized state carries. */
function stateItem(id: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    [StateAttr.pk]: `task_view#${id}`,
    [StateAttr.revision]: 3,
    [StateAttr.version]: 7,
    [StateAttr.data]: '{"status":"open"}',
    [StateAttr.aggType]: "task_view",
    [StateAttr.aggId]: id,
    [StateAttr.updatedAt]: T1,
    ...over,
  };
}

const summary = (over: Record<string, unknown> = {}) => ({
  [StateAttr.kind]: "task",
  [StateAttr.status]: "open",
  [StateAttr.counts]: { events: 2 },
  ...over,
});

/** A workflow run's item: the one kind with a tenant_list (listedByTenant). */
function runItem(id: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return stateItem(id, {
    [StateAttr.pk]: `dag_run#${id}`,
    [StateAttr.aggType]: "dag_run",
    ...summary({ [StateAttr.kind]: "run", [StateAttr.status]: "RUNNING" }),
    ...over,
  });
}

async function put(item: Record<string, unknown>): Promise<void> {
  await client.send(new PutItemCommand({ TableName: tables.state, Item: marshall(item) }));
}

async function get(pk: string): Promise<Record<string, unknown> | undefined> {
  const { Item } = await client.send(
    new GetItemCommand({ TableName: tables.state, Key: { [StateAttr.pk]: { S: pk } } }),
  );
  return Item ? unmarshall(Item) : undefined;
}

async function indexKeys(index: string, attribute: string, value: string): Promise<string[]> {
  const { Items } = await client.send(
    new QueryCommand({
      TableName: tables.state,
      IndexName: index,
      KeyConditionExpression: "#k = :k",
      ExpressionAttributeNames: { "#k": attribute },
      ExpressionAttributeValues: { ":k": { S: value } },
    }),
  );
  return (Items ?? []).map((i) => String(unmarshall(i)[StateAttr.pk])).sort();
}

/** The item as a Scan of the backfill sees it. */
async function scanned(pk: string): Promise<BackfillItem> {
  const { Item } = await client.send(
    new GetItemCommand({ TableName: tables.state, Key: { [StateAttr.pk]: { S: pk } } }),
  );
  if (!Item) throw new Error(`no item ${pk}`);
  return backfillItemOf(Item);
}

describe("lists backfill: the list keys of summarized states written before they existed", () => {
  it("sets listed_at (and waiting_since where the state waits) from updated_at; a second run updates nothing", async () => {
    const plain = stateItem("plain", { ...summary(), [StateAttr.updatedAt]: T1 });
    const waits = stateItem("waits", {
      ...summary({ [StateAttr.waiting]: "held_reply" }),
      [StateAttr.updatedAt]: T2,
    });
    const listedWaits = stateItem("listed-waits", {
      ...summary({ [StateAttr.waiting]: "needs_human", [StateAttr.listedAt]: LISTED }),
      [StateAttr.updatedAt]: T3,
    });
    // A task with its list keys needs nothing: only runs have a tenant_list.
    const listed = stateItem("listed", { ...summary({ [StateAttr.listedAt]: LISTED }) });
    const run = runItem("run", { [StateAttr.updatedAt]: T2 });
    const listedRun = runItem("listed-run", { [StateAttr.listedAt]: LISTED });
    const unsummarized = stateItem("unsummarized");
    for (const item of [plain, waits, listedWaits, listed, run, listedRun, unsummarized])
      await put(item);

    const first = await backfillListKeys(client, tables.state);
    expect(first).toEqual({ scanned: 5, updated: 5, skipped: 0 });

    expect(await get("task_view#plain")).toEqual({ ...plain, [StateAttr.listedAt]: T1 });
    expect(await get("task_view#waits")).toEqual({
      ...waits,
      [StateAttr.listedAt]: T2,
      [StateAttr.waitingSince]: T2,
    });
    // Already listed: listed_at is kept, only waiting_since is added.
    expect(await get("task_view#listed-waits")).toEqual({
      ...listedWaits,
      [StateAttr.waitingSince]: T3,
    });
    expect(await get("task_view#listed")).toEqual(listed);
    expect(await get("task_view#unsummarized")).toEqual(unsummarized);
    // No tenant named: the default tenant's list of runs of the status.
    const tenantList = { [StateAttr.tenantList]: "default#run#RUNNING" };
    expect(await get("dag_run#run")).toEqual({ ...run, ...tenantList, [StateAttr.listedAt]: T2 });
    // Already listed: only tenant_list is added.
    expect(await get("dag_run#listed-run")).toEqual({ ...listedRun, ...tenantList });

    expect(await indexKeys(StateIndex.byKind, StateAttr.kind, "task")).toEqual([
      "task_view#listed",
      "task_view#listed-waits",
      "task_view#plain",
      "task_view#waits",
    ]);
    expect(await indexKeys(StateIndex.byWaiting, StateAttr.waiting, "held_reply")).toEqual([
      "task_view#waits",
    ]);
    expect(
      await indexKeys(StateIndex.byTenantStatus, StateAttr.tenantList, "default#run#RUNNING"),
    ).toEqual(["dag_run#listed-run", "dag_run#run"]);
    expect(
      await indexKeys(StateIndex.byTenantStatus, StateAttr.tenantList, "default#task#open"),
    ).toEqual([]);

    const second = await backfillListKeys(client, tables.state);
    expect(second).toEqual({ scanned: 0, updated: 0, skipped: 0 });
  });

  it("reports progress after each Scan page of at most pageLimit items", async () => {
    for (let i = 0; i < 5; i++) await put(stateItem(`s${i}`, summary()));
    const seen: ListBackfillCounts[] = [];
    const counts = await backfillListKeys(client, tables.state, {
      pageLimit: 2,
      onProgress: (c) => {
        seen.push(c);
      },
    });
    expect(counts).toEqual({ scanned: 5, updated: 5, skipped: 0 });
    expect(seen.length).toBeGreaterThanOrEqual(3);
    for (const [i, c] of seen.entries())
      expect(c.scanned).toBeGreaterThanOrEqual(seen[i - 1]?.scanned ?? 0);
    expect(seen.at(-1)).toEqual(counts);
  });

  it("sets a run's tenant_list from the tenant the state names, and no task's", async () => {
    const acme = runItem("acme", {
      [StateAttr.listedAt]: LISTED,
      [StateAttr.status]: "SUCCEEDED",
      [StateAttr.tenant]: "acme",
    });
    const acmeTask = stateItem("acme", { ...summary(), [StateAttr.tenant]: "acme" });
    await put(acme);
    await put(acmeTask);
    expect(await backfillListKeys(client, tables.state)).toEqual({
      scanned: 2,
      updated: 2,
      skipped: 0,
    });
    expect(await get("dag_run#acme")).toEqual({
      ...acme,
      [StateAttr.tenantList]: "acme#run#SUCCEEDED",
    });
    expect(await get("task_view#acme")).toEqual({ ...acmeTask, [StateAttr.listedAt]: T1 });
    expect(
      await indexKeys(StateIndex.byTenantStatus, StateAttr.tenantList, "acme#run#SUCCEEDED"),
    ).toEqual(["dag_run#acme"]);
  });

  it("lists an item without updated_at at the time the backfill started", async () => {
    const item = stateItem("no-time", summary());
    delete item[StateAttr.updatedAt];
    await put(item);
    const now = () => new Date(T2);
    expect(await backfillListKeys(client, tables.state, { now })).toMatchObject({ updated: 1 });
    expect((await get("task_view#no-time"))?.[StateAttr.listedAt]).toBe(T2);
  });
});

describe("lists backfill: an item that changed between the Scan and its update", () => {
  it("skips an item that lost its kind (no longer summarized), writing nothing", async () => {
    await put(stateItem("lost", summary({ [StateAttr.waiting]: "held_reply" })));
    const seen = await scanned("task_view#lost");
    await client.send(
      new UpdateItemCommand({
        TableName: tables.state,
        Key: { [StateAttr.pk]: { S: "task_view#lost" } },
        UpdateExpression: "REMOVE #kind",
        ExpressionAttributeNames: { "#kind": StateAttr.kind },
      }),
    );
    expect(await backfillItem(client, tables.state, seen, T1)).toBe("skipped");
    const after = await get("task_view#lost");
    expect(after?.[StateAttr.listedAt]).toBeUndefined();
    expect(after?.[StateAttr.waitingSince]).toBeUndefined();
  });

  it("skips a deleted item and does not create it again", async () => {
    await put(stateItem("gone", summary()));
    const seen = await scanned("task_view#gone");
    await client.send(
      new DeleteItemCommand({
        TableName: tables.state,
        Key: { [StateAttr.pk]: { S: "task_view#gone" } },
      }),
    );
    expect(await backfillItem(client, tables.state, seen, T1)).toBe("skipped");
    expect(await get("task_view#gone")).toBeUndefined();
  });

  it("skips an item that waits for something else now, so no waiting_since of another wait", async () => {
    await put(stateItem("moved", summary({ [StateAttr.waiting]: "held_reply" })));
    const seen = await scanned("task_view#moved");
    await put(stateItem("moved", summary({ [StateAttr.waiting]: "needs_human" })));
    expect(await backfillItem(client, tables.state, seen, T1)).toBe("skipped");
    expect((await get("task_view#moved"))?.[StateAttr.waitingSince]).toBeUndefined();
  });

  it("skips a run whose status changed, so no tenant_list of a status it left", async () => {
    await put(runItem("ended", { [StateAttr.listedAt]: LISTED }));
    const seen = await scanned("dag_run#ended");
    await put(runItem("ended", { [StateAttr.listedAt]: LISTED, [StateAttr.status]: "SUCCEEDED" }));
    expect(await backfillItem(client, tables.state, seen, T1)).toBe("skipped");
    expect((await get("dag_run#ended"))?.[StateAttr.tenantList]).toBeUndefined();
  });

  it("keeps the listed_at a consumer wrote meanwhile, and its revision", async () => {
    await put(runItem("raced"));
    const seen = await scanned("dag_run#raced");
    const consumed = runItem("raced", {
      [StateAttr.listedAt]: LISTED,
      [StateAttr.tenantList]: "default#run#RUNNING",
      [StateAttr.revision]: 4,
      [StateAttr.updatedAt]: T3,
    });
    await put(consumed);
    expect(await backfillItem(client, tables.state, seen, T1)).toBe("updated");
    expect(await get("dag_run#raced")).toEqual(consumed);
  });
});

describe("agentbus lists backfill", () => {
  const cli = (...args: string[]) =>
    runCli([
      "--endpoint",
      emulator().endpoint,
      "--region",
      emulator().region,
      "--state-table",
      tables.state,
      ...args,
    ]);

  it("backfills the table and prints the counts, as text and with --json", async () => {
    await put(stateItem("cli", summary({ [StateAttr.waiting]: "held_reply" })));
    const text = await cli("lists", "backfill");
    expect(text.stderr).toBe("");
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`scanning ${tables.state}`);
    expect(text.stdout).toContain("1 item(s) without list keys found, 1 updated, 0 skipped — done");
    expect(await get("task_view#cli")).toMatchObject({
      [StateAttr.listedAt]: T1,
      [StateAttr.waitingSince]: T1,
    });
    const json = await cli("lists", "backfill", "--json", "--page-size", "10");
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({
      table: tables.state,
      scanned: 0,
      updated: 0,
      skipped: 0,
    });
  });

  it("refuses a bad --page-size with exit code 2 before any call", async () => {
    const result = await cli("lists", "backfill", "--page-size", "0");
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--page-size");
    expect(result.stdout).toBe("");
  });
});
