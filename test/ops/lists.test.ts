import {
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { listingAfter } from "../../functions/core/listing";
import type { StateSummary, StoredState } from "../../functions/core/ports";
import { ManualClock } from "../../functions/core/runtime";
import { fromSdk } from "../../lib/operator/from-sdk";
import { summaries, summaryPage } from "../../lib/operator/lists";
import type { OpsStack } from "../../lib/operator/stack";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import {
  createTableInput,
  createTables,
  deleteTables,
  LEGACY_STATE_LAYOUT,
} from "../support/tables";

/**
 * The operator's lists on moto: keys from the keys-only list indexes, summaries from the items;
 * and, on a table that has only the legacy indexes, the legacy ones.
 */

let client: DynamoDBClient;
let tables: TableNames;
let legacyTable: string;

const stackOf = (state: string) =>
  ({ dynamodb: client, names: { tables: { ...tables, state } } }) as unknown as OpsStack;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  const prefix = `lists-${newUlid().toLowerCase()}`;
  tables = await createTables(client, prefix);
  legacyTable = `${prefix}-legacy-state`;
  await client.send(new CreateTableCommand(createTableInput(legacyTable, LEGACY_STATE_LAYOUT)));
});

afterAll(async () => {
  await deleteTables(client, { ...tables, state: legacyTable });
  await deleteTables(client, tables);
  client.destroy();
});

describe("summaries", () => {
  it("lists states newest listed first, with their current summaries, and waits by since when", async () => {
    const clock = new ManualClock("2026-12-01T10:00:00.000Z");
    const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
    const kind = "conversation";
    const states = new Map<string, StoredState | undefined>();
    const write = async (id: string, summary: StateSummary) => {
      const before = states.get(id);
      const listing = listingAfter(before?.listing, summary, clock.now());
      const aggregate = { type: "conversation_view", id };
      await store.commit({
        state: {
          aggregate,
          expectedRevision: before?.revision ?? 0,
          next: { id },
          version: 0,
          summary,
          listing,
        },
      });
      states.set(id, (await store.load({ state: aggregate })).state);
      clock.advance(1_000);
    };
    const waitFor = "held_reply";
    await write("a", { kind, status: "open" });
    await write("b", { kind, status: "open", waiting: waitFor });
    await write("c", { kind, status: "open", waiting: waitFor });
    // a changes last: it stays where it was listed, with its new summary.
    await write("a", { kind, status: "closed", label: "done", counts: { turns: 2 } });
    // b stops waiting, then waits again: its wait starts anew.
    await write("b", { kind, status: "open" });
    await write("b", { kind, status: "open", waiting: waitFor });

    const listed = await summaries(stackOf(tables.state), { kind });
    expect(listed.map((r) => r.id)).toEqual(["c", "b", "a"]);
    expect(listed[2]).toEqual({
      kind: "conversation",
      id: "a",
      status: "closed",
      label: "done",
      counts: { turns: 2 },
      tenant: "default",
      listedAt: "2026-12-01T10:00:00.000Z",
      updatedAt: "2026-12-01T10:00:03.000Z",
    });
    expect(listed[1]?.waitingSince).toBe("2026-12-01T10:00:05.000Z");
    expect(listed.map((r) => r.listedAt)).toEqual([
      "2026-12-01T10:00:02.000Z",
      "2026-12-01T10:00:01.000Z",
      "2026-12-01T10:00:00.000Z",
    ]);

    const waiting = await summaries(stackOf(tables.state), { waiting: waitFor });
    expect(waiting.map((r) => [r.id, r.waitingSince])).toEqual([
      ["b", "2026-12-01T10:00:05.000Z"],
      ["c", "2026-12-01T10:00:02.000Z"],
    ]);
    expect(await summaries(stackOf(tables.state), { kind }, 2)).toHaveLength(2);
  });

  it("lists one tenant's states, reading past other tenants' pages, a state without one the default's", async () => {
    const clock = new ManualClock("2026-12-02T10:00:00.000Z");
    const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
    const kind = "run";
    // 150 runs, newest last: every third acme's, the others of a state that names no tenant.
    const tenantOfRun = (i: number) => (i % 3 === 0 ? "acme" : undefined);
    for (let i = 0; i < 150; i++) {
      const tenant = tenantOfRun(i);
      const summary: StateSummary = { kind, status: "RUNNING", ...(tenant ? { tenant } : {}) };
      await store.commit({
        state: {
          aggregate: { type: "dag_run", id: `run_${String(i).padStart(3, "0")}` },
          expectedRevision: 0,
          next: { i },
          version: 0,
          summary,
          listing: listingAfter(undefined, summary, clock.now()),
        },
      });
      clock.advance(1_000);
    }
    const stack = stackOf(tables.state);
    const acme = await summaries(stack, { kind }, 40, { tenant: "acme" });
    const acmeIds = Array.from({ length: 150 }, (_, i) => i)
      .filter((i) => tenantOfRun(i) === "acme")
      .reverse()
      .slice(0, 40)
      .map((i) => `run_${String(i).padStart(3, "0")}`);
    // The 40 newest of acme's span 118 entries of the list: more than one page of keys.
    expect(acme.map((r) => r.id)).toEqual(acmeIds);
    expect(new Set(acme.map((r) => r.tenant))).toEqual(new Set(["acme"]));
    const byDefault = await summaries(stack, { kind }, 5, { tenant: "default" });
    expect(byDefault.map((r) => r.id)).toEqual([
      "run_149",
      "run_148",
      "run_146",
      "run_145",
      "run_143",
    ]);
    expect(byDefault.every((r) => r.tenant === "default")).toBe(true);
    expect(await summaries(stack, { kind }, 50, { tenant: "globex" })).toEqual([]);
    // Without a tenant, every tenant's, each named.
    const all = await summaries(stack, { kind }, 3);
    expect(all.map((r) => [r.id, r.tenant])).toEqual([
      ["run_149", "default"],
      ["run_148", "default"],
      ["run_147", "acme"],
    ]);
  });

  it("pages one tenant's runs of one status newest first from by-tenant-status, by age", async () => {
    const clock = new ManualClock("2026-12-03T10:00:00.000Z");
    const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
    const kind = "run";
    const tenants = ["initech", "globex", undefined] as const;
    const statuses = ["RUNNING", "SUCCEEDED", "FAILED"] as const;
    const id = (i: number) => `trun_${String(i).padStart(3, "0")}`;
    const commit = async (i: number, revision: number, status: string) => {
      const tenant = tenants[i % 3];
      const summary: StateSummary = { kind, status, ...(tenant ? { tenant } : {}) };
      const aggregate = { type: "dag_run", id: id(i) };
      const before = revision === 0 ? undefined : (await store.load({ state: aggregate })).state;
      await store.commit({
        state: {
          aggregate,
          expectedRevision: revision,
          next: { i },
          version: 0,
          summary,
          listing: listingAfter(before?.listing, summary, clock.now()),
        },
      });
    };
    // 270 runs, one a second: tenant by i % 3, status by floor(i / 3) % 3.
    for (let i = 0; i < 270; i++) {
      await commit(i, 0, statuses[Math.floor(i / 3) % 3] ?? "RUNNING");
      clock.advance(1_000);
    }
    const expected = (tenant: number, status: number) =>
      Array.from({ length: 270 }, (_, i) => i)
        .filter((i) => i % 3 === tenant && Math.floor(i / 3) % 3 === status)
        .reverse()
        .map(id);
    const stack = stackOf(tables.state);
    const initechRunning = { tenant: "initech", status: "RUNNING" };
    // Paged 20 at a time: every one of initech's 30 RUNNING runs once, newest first, nothing else.
    const first = await summaryPage(stack, { kind }, { limit: 20, filter: initechRunning });
    expect(first.rows.map((r) => r.id)).toEqual(expected(0, 0).slice(0, 20));
    expect(first.next).toBeDefined();
    const second = await summaryPage(
      stack,
      { kind },
      { limit: 20, filter: initechRunning, after: first.next },
    );
    expect(second.rows.map((r) => r.id)).toEqual(expected(0, 0).slice(20));
    expect(second.next).toBeUndefined();
    expect(
      [...first.rows, ...second.rows].every(
        (r) => r.tenant === "initech" && r.status === "RUNNING",
      ),
    ).toBe(true);
    // A state that names no tenant is the default tenant's.
    const byDefault = await summaries(stack, { kind }, 100, {
      tenant: "default",
      status: "FAILED",
    });
    expect(byDefault.map((r) => r.id)).toEqual(expected(2, 2));
    // Status alone: every tenant's, from by-kind-listed.
    const failed = await summaries(stack, { kind }, 4, { status: "FAILED" });
    expect(failed.map((r) => [r.id, r.status])).toEqual(
      [269, 268, 267, 260].map((i) => [id(i), "FAILED"]),
    );
    // By age: listed at or after since, before before.
    const window = {
      ...initechRunning,
      since: "2026-12-03T10:00:18.000Z",
      before: "2026-12-03T10:00:54.000Z",
    };
    const at = (x: string) => Number(x.slice(5));
    expect((await summaries(stack, { kind }, 50, window)).map((r) => r.id)).toEqual(
      expected(0, 0).filter((x) => at(x) >= 18 && at(x) < 54),
    );
    // A run that ends leaves the RUNNING list and joins the SUCCEEDED one where it was listed.
    const moved = expected(0, 0)[5] ?? "";
    await commit(at(moved), 1, "SUCCEEDED");
    const running = await summaries(stack, { kind }, 50, initechRunning);
    expect(running.map((r) => r.id)).toEqual(expected(0, 0).filter((x) => x !== moved));
    const succeeded = await summaries(stack, { kind }, 50, {
      tenant: "initech",
      status: "SUCCEEDED",
    });
    expect(succeeded.map((r) => r.id)).toEqual([...expected(0, 1), moved].sort().reverse());
  });

  it("gives only runs a tenant_list; a conversation's tenant and status list reads its kind's", async () => {
    const clock = new ManualClock("2026-12-05T10:00:00.000Z");
    const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
    const commit = async (type: string, id: string, summary: StateSummary) => {
      await store.commit({
        state: {
          aggregate: { type, id },
          expectedRevision: 0,
          next: { id },
          version: 0,
          summary,
          listing: listingAfter(undefined, summary, clock.now()),
        },
      });
      clock.advance(1_000);
      const { Item } = await client.send(
        new GetItemCommand({ TableName: tables.state, Key: { pk: { S: `${type}#${id}` } } }),
      );
      return Item ? unmarshall(Item) : undefined;
    };
    const kind = "conversation";
    const open = { kind, status: "open", tenant: "umbrella" };
    const conversations = [
      await commit("conversation", "tl_c1", open),
      await commit("conversation", "tl_c2", { ...open, status: "closed" }),
      await commit("conversation", "tl_c3", open),
    ];
    const run = await commit("dag_run", "tl_r1", { ...open, kind: "run", status: "RUNNING" });
    expect(conversations.map((c) => [c?.kind, c?.tenant_id, c?.tenant_list])).toEqual([
      ["conversation", "umbrella", undefined],
      ["conversation", "umbrella", undefined],
      ["conversation", "umbrella", undefined],
    ]);
    expect(run?.tenant_list).toBe("umbrella#run#RUNNING");
    const stack = stackOf(tables.state);
    const listed = await summaries(stack, { kind }, 50, { tenant: "umbrella", status: "open" });
    expect(listed.map((r) => [r.id, r.status])).toEqual([
      ["tl_c3", "open"],
      ["tl_c1", "open"],
    ]);
    const runs = await summaries(stack, { kind: "run" }, 50, {
      tenant: "umbrella",
      status: "RUNNING",
    });
    expect(runs.map((r) => r.id)).toEqual(["tl_r1"]);
  });

  it("leaves out a state whose status changed since its by-tenant-status entry was read", async () => {
    // The index is eventually consistent: an entry may still name a status the item has left.
    const item = {
      pk: "dag_run#stale_1",
      revision: 2,
      version: 1,
      agg_type: "dag_run",
      agg_id: "stale_1",
      updated_at: "2026-12-04T10:00:01.000Z",
      kind: "run",
      status: "SUCCEEDED",
      tenant_id: "stale",
      listed_at: "2026-12-04T10:00:00.000Z",
      tenant_list: "stale#run#RUNNING",
    };
    await client.send(new PutItemCommand({ TableName: tables.state, Item: marshall(item) }));
    const stack = stackOf(tables.state);
    expect(
      await summaries(stack, { kind: "run" }, 50, { tenant: "stale", status: "RUNNING" }),
    ).toEqual([]);
    expect(
      (await summaries(stack, { kind: "run" }, 50, { tenant: "stale" })).map((r) => r.status),
    ).toEqual(["SUCCEEDED"]);
  });

  it("reads the legacy index, summaries and all, where the new one is not there yet", async () => {
    const kind = "task";
    const item = (id: string, updatedAt: string, waiting?: string) => ({
      pk: `task_view#${id}`,
      revision: 1,
      version: 1,
      agg_type: "task_view",
      agg_id: id,
      updated_at: updatedAt,
      kind,
      status: "planned",
      ...(waiting ? { waiting } : {}),
    });
    for (const i of [
      item("x", "2026-12-01T09:00:00.000Z", "needs_human"),
      { ...item("y", "2026-12-01T09:05:00.000Z"), tenant_id: "acme" },
    ])
      await client.send(new PutItemCommand({ TableName: legacyTable, Item: marshall(i) }));
    const listed = await summaries(stackOf(legacyTable), { kind });
    expect(listed.map((r) => [r.id, r.updatedAt, r.listedAt])).toEqual([
      ["y", "2026-12-01T09:05:00.000Z", undefined],
      ["x", "2026-12-01T09:00:00.000Z", undefined],
    ]);
    const waiting = await summaries(stackOf(legacyTable), { waiting: "needs_human" });
    expect(waiting.map((r) => r.id)).toContain("x");
    // The legacy index projects no tenant: it is read from the items, as the new index's lists do.
    const acme = await summaries(stackOf(legacyTable), { kind }, 50, { tenant: "acme" });
    expect(acme.map((r) => [r.id, r.tenant])).toEqual([["y", "acme"]]);
    // Neither by-tenant-status nor by-kind-listed: the legacy index, filtered from the items.
    const planned = { tenant: "acme", status: "planned" };
    const byStatus = await summaries(stackOf(legacyTable), { kind }, 50, planned);
    expect(byStatus.map((r) => r.id)).toEqual(["y"]);
    expect(
      await summaries(stackOf(legacyTable), { kind }, 50, { ...planned, status: "done" }),
    ).toEqual([]);
  });
});
