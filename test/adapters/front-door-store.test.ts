import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  acceptedRequestKey,
  DynamoAcceptedRequests,
} from "../../functions/adapters/dynamodb/accepted-requests";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import {
  DynamoRunsInFlight,
  runsInFlightKey,
} from "../../functions/adapters/dynamodb/runs-in-flight";
import { DynamoTenantLimits } from "../../functions/adapters/dynamodb/tenant-limits";
import type { AcceptedRequest } from "../../functions/front-door/accepted";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { createTableInput } from "../support/tables";

/** The front door's items on the state table, against the emulator. */

const tableName = `front-door-state-${ulid().toLowerCase()}`;
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

const record = (key: string, sha: string): AcceptedRequest => ({
  key,
  request_sha256: sha,
  envelope: { event_id: ulid(), event_type: "conversation.message.received" } as Envelope,
  response: { task_id: "task_1" },
  accepted_at: "2026-12-02T10:00:00.000Z",
});

describe("DynamoAcceptedRequests", () => {
  it("keeps the first request under a key, and gives it back to every later put", async () => {
    const store = new DynamoAcceptedRequests({ client: fromSdk(client), tableName });
    const first = record(`acme#${ulid()}`, "a");
    const expires = new Date("2026-12-03T10:00:00.000Z");
    expect(await store.putIfAbsent(first, expires)).toEqual(first);
    expect(await store.putIfAbsent(record(first.key, "b"), expires)).toEqual(first);
    expect(await store.find(first.key)).toEqual(first);
    expect(await store.find(`acme#${ulid()}`)).toBeUndefined();
    const item = await client.send(
      new GetItemCommand({
        TableName: tableName,
        Key: { pk: { S: acceptedRequestKey(first.key) } },
      }),
    );
    expect(item.Item?.ttl?.N).toBe(String(expires.getTime() / 1000));
    // No attribute of the table's sparse indexes: the item is in none of them.
    expect(Object.keys(item.Item ?? {}).sort()).toEqual(
      ["accepted_at", "envelope", "pk", "request_sha256", "response", "ttl"].sort(),
    );
  });
});

describe("DynamoTenantLimits", () => {
  it("counts a tenant's requests per minute up to the cap, then refuses until the next minute", async () => {
    const limits = new DynamoTenantLimits({ client: fromSdk(client), tableName });
    const tenant = `t-${ulid().toLowerCase()}`;
    const at = new Date("2026-12-02T10:04:45.000Z");
    expect(await limits.take(tenant, at, 2)).toEqual({ ok: true });
    expect(await limits.take(tenant, at, 2)).toEqual({ ok: true });
    expect(await limits.take(tenant, at, 2)).toEqual({ retryAfterSeconds: 15 });
    expect(await limits.take(`${tenant}-other`, at, 2)).toEqual({ ok: true });
    expect(await limits.take(tenant, new Date("2026-12-02T10:05:00.000Z"), 2)).toEqual({
      ok: true,
    });
    // A tenant with a cap of its own: the same item, counted up to its cap.
    expect(await limits.take(tenant, at, 3)).toEqual({ ok: true });
    expect(await limits.take(tenant, at, 3)).toEqual({ retryAfterSeconds: 15 });
  });
});

describe("DynamoRunsInFlight", () => {
  it("counts a tenant's runs up to the cap, gives the counted ones when full, and takes runs out", async () => {
    const runs = new DynamoRunsInFlight({ client: fromSdk(client), tableName });
    const tenant = `t-${ulid().toLowerCase()}`;
    const run = (n: number) => ({ runId: `run_${n}`, since: `2026-12-02T10:0${n}:00.000Z` });
    expect(await runs.add(tenant, run(1), 2)).toEqual({ ok: true });
    expect(await runs.add(tenant, run(2), 2)).toEqual({ ok: true });
    // A run counted already stays counted (an add sent again after a timeout).
    expect(await runs.add(tenant, run(2), 2)).toEqual({ ok: true });
    const full = await runs.add(tenant, run(3), 2);
    expect(
      "counted" in full && [...full.counted].sort((a, b) => a.runId.localeCompare(b.runId)),
    ).toEqual([run(1), run(2)]);
    expect(await runs.add(`${tenant}-other`, run(3), 2)).toEqual({ ok: true });
    // Taking out a run not counted, or one twice, changes nothing more.
    await runs.remove(tenant, [run(1), run(9)]);
    await runs.remove(tenant, [run(1)]);
    expect(await runs.add(tenant, run(3), 2)).toEqual({ ok: true });
    expect(await runs.add(tenant, run(4), 2)).toMatchObject({ counted: expect.any(Array) });
    await runs.remove(tenant, [run(2), run(3)]);
    const item = await client.send(
      new GetItemCommand({ TableName: tableName, Key: { pk: { S: runsInFlightKey(tenant) } } }),
    );
    // The last run out leaves no set; no attribute of the table's indexes, no expiry.
    expect(Object.keys(item.Item ?? {})).toEqual(["pk"]);
    expect(await runs.add(tenant, run(4), 2)).toEqual({ ok: true });
    expect(await runs.add(tenant, run(5), 1)).toEqual({ counted: [run(4)] });
  });
});
