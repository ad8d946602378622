import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  PutItemCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import { tenantListKey } from "../../functions/adapters/dynamodb/tables";
import { DynamoTenantRunIndex } from "../../functions/adapters/dynamodb/tenant-runs";
import type { RunStatus } from "../../functions/core/dag/run";
import type { StateSummary, StoredState } from "../../functions/core/ports";
import {
  InMemoryTenantRunIndex,
  type RunIndexEntry,
  type TenantRunIndex,
} from "../../functions/front-door/run-list";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { createTableInput } from "../support/tables";

/**
 * One contract for the index of a tenant's runs (functions/front-door/run-list.ts
 * TenantRunIndex), run against the in-memory twin and the state table's by-tenant-status index on
 * the emulator: newest first, ties by run id, a page after a position, each run once while its
 * status moves, no other tenant's.
 */

interface Store {
  readonly index: TenantRunIndex;
  put(runId: string, tenant: string, status: RunStatus, listedAt: string): Promise<void>;
}

const tableName = `tenant-runs-${ulid().toLowerCase()}`;
let client: DynamoDBClient;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  await client.send(new CreateTableCommand(createTableInput(tableName, TABLES.state)));
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: tableName });
});

afterAll(async () => {
  await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
  client.destroy();
});

function memoryStore(): Store {
  const states = new Map<string, StoredState>();
  const summaries = new Map<string, StateSummary>();
  return {
    index: new InMemoryTenantRunIndex({ states, summaries }),
    async put(runId, tenant, status, listedAt) {
      const key = `dag_run#${runId}`;
      states.set(key, {
        aggregate: { type: "dag_run", id: runId },
        revision: 1,
        version: 1,
        data: {},
        listing: { listedAt },
      });
      summaries.set(key, { kind: "run", status, tenant });
    },
  };
}

function dynamoStore(): Store {
  // Each store its own tenants, so the two stores' runs never meet in the table.
  return {
    index: new DynamoTenantRunIndex({ client: fromSdk(client), tableName }),
    async put(runId, tenant, status, listedAt) {
      await client.send(
        new PutItemCommand({
          TableName: tableName,
          Item: {
            pk: { S: `dag_run#${runId}` },
            kind: { S: "run" },
            status: { S: status },
            listed_at: { S: listedAt },
            tenant_list: { S: tenantListKey(tenant, "run", status) },
          },
        }),
      );
    },
  };
}

const at = (minute: number) => new Date(Date.UTC(2026, 11, 5, 10, minute)).toISOString();
const ids = (entries: readonly RunIndexEntry[]) => entries.map((e) => e.runId);

describe.each([
  ["in memory", memoryStore],
  ["DynamoDB (by-tenant-status)", dynamoStore],
])("a tenant's runs, %s", (_name, make) => {
  it("newest first (ties by run id), a page after a position, each once while a status moves", async () => {
    const store = make();
    const acme = `acme-${ulid().toLowerCase()}`;
    const globex = `globex-${ulid().toLowerCase()}`;
    await store.put("run_a", acme, "RUNNING", at(1));
    await store.put("run_b", acme, "COMPLETED", at(2));
    await store.put("run_c", acme, "RUNNING", at(3));
    await store.put("run_d", acme, "FAILED", at(3));
    await store.put("run_e", acme, "RUNNING", at(4));
    await store.put("run_g", globex, "RUNNING", at(5));
    const all = ["RUNNING", "COMPLETED", "FAILED"] as const;
    const first = await store.index.page(acme, all, 2);
    expect(ids(first.entries)).toEqual(["run_e", "run_d"]);
    expect(first.more).toBe(true);
    // run_c ends between the pages: it is listed once, where its time puts it.
    await store.put("run_c", acme, "COMPLETED", at(3));
    const second = await store.index.page(acme, all, 2, first.entries.at(-1));
    expect(ids(second.entries)).toEqual(["run_c", "run_b"]);
    const third = await store.index.page(acme, all, 2, second.entries.at(-1));
    expect(ids(third.entries)).toEqual(["run_a"]);
    expect(third.more).toBe(false);
    expect(third.entries[0]?.listedAt).toBe(at(1));
    const running = await store.index.page(acme, ["RUNNING"], 10);
    expect(ids(running.entries)).toEqual(["run_e", "run_a"]);
    expect(ids((await store.index.page(globex, all, 10)).entries)).toEqual(["run_g"]);
    expect((await store.index.page(`other-${ulid().toLowerCase()}`, all, 10)).entries).toEqual([]);
  });
});
