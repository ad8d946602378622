import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ProvisionedThroughputExceededException,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AwsClient } from "../../functions/adapters/aws/client";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import { DynamoSideEffects } from "../../functions/adapters/dynamodb/side-effects";
import { PermanentError, TransientError } from "../../functions/core/errors";
import { SideEffectTransitionError } from "../../functions/core/side-effects";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { newTaskId, newUlid } from "../support/factories";

const tableName = `side-effects-${newUlid().toLowerCase()}`;

/**
 * moto_server handles requests on several threads without serializing the writes to one item,
 * so two concurrent UpdateItems can both see the old item there; DynamoDB (and DynamoDB Local)
 * apply them one after another. The exact-count assertions of the concurrency tests run only on
 * an emulator that is not moto (AWS_ENDPOINT_URL pointing at LocalStack, for example).
 */
const serializesItemWrites = !(await fetch(`${emulator().endpoint}/moto-api/data.json`)
  .then((r) => r.ok)
  .catch(() => false));
let client: DynamoDBClient;
let store: DynamoSideEffects;

const T0 = new Date("2026-09-01T10:00:00.000Z");
const T1 = new Date("2026-09-01T10:00:05.000Z");
const T2 = new Date("2026-09-01T10:00:09.000Z");

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  const key = TABLES.sideEffects.partitionKey;
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      KeySchema: [{ AttributeName: key.name, KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: key.name, AttributeType: key.type }],
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: tableName });
  store = new DynamoSideEffects({ client: fromSdk(client), tableName });
});

afterAll(async () => {
  await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
  client.destroy();
});

const newKey = () => {
  const taskId = newTaskId();
  return { key: `${taskId}:reply:1`, meta: { task_id: taskId, kind: "reply" } };
};

describe("DynamoSideEffects", () => {
  it("creates a pending record on the first claim and counts every claim on one item", async () => {
    const { key, meta } = newKey();
    const first = await store.claim(key, meta, T0);
    expect(first).toEqual({
      key,
      state: "pending",
      attempts: 1,
      created_at: T0.toISOString(),
      updated_at: T0.toISOString(),
      task_id: meta.task_id,
      kind: "reply",
    });
    const second = await store.claim(key, { task_id: "task_other", kind: "other" }, T1);
    expect(second).toMatchObject({
      key,
      state: "pending",
      attempts: 2,
      created_at: T0.toISOString(),
      updated_at: T1.toISOString(),
      task_id: meta.task_id,
      kind: "reply",
    });
    const { Item } = await client.send(
      new GetItemCommand({ TableName: tableName, Key: { effect_key: { S: key } } }),
    );
    expect(Item?.attempts).toEqual({ N: "2" });
    expect(Item?.state).toEqual({ S: "pending" });
  });

  it("does not reset a record's state when it is claimed again", async () => {
    const { key, meta } = newKey();
    await store.claim(key, meta, T0);
    await store.markSucceeded(key, { delivery_id: "msg-1" }, T1);
    const again = await store.claim(key, meta, T2);
    expect(again).toMatchObject({
      state: "succeeded",
      attempts: 2,
      result: { delivery_id: "msg-1" },
    });
  });

  it("answers concurrent claims of one key from one record", async () => {
    const { key, meta } = newKey();
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) => store.claim(key, meta, new Date(T0.getTime() + i))),
    );
    for (const claim of claims) {
      expect(claim).toMatchObject({ key, state: "pending", task_id: meta.task_id, kind: "reply" });
      expect(claim.attempts).toBeGreaterThanOrEqual(1);
    }
    const stored = await store.get(key);
    expect(stored?.state).toBe("pending");
    expect(stored?.attempts).toBeGreaterThanOrEqual(Math.max(...claims.map((c) => c.attempts)));
    if (serializesItemWrites) {
      // DynamoDB applies the writes to one item one after another.
      expect(claims.map((c) => c.attempts).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect(new Set(claims.map((c) => c.created_at)).size).toBe(1);
      expect(stored?.attempts).toBe(8);
    }
    // One more claim after the burst counts on the same record.
    const after = await store.claim(key, meta, T2);
    expect(after.attempts).toBe((stored?.attempts ?? 0) + 1);
    expect(after.created_at).toBe(stored?.created_at);
  });

  it("moves pending -> unknown -> unknown -> succeeded and keeps the result", async () => {
    const { key, meta } = newKey();
    await store.claim(key, meta, T0);
    const unknown = await store.markUnknown(
      key,
      { code: "channel.outcome_unknown", message: "a" },
      T1,
    );
    expect(unknown).toMatchObject({ state: "unknown", error: { code: "channel.outcome_unknown" } });
    await store.markUnknown(key, { code: "channel.outcome_unknown", message: "b" }, T1);
    const done = await store.markSucceeded(key, { delivery_id: "msg-9" }, T2);
    expect(done).toMatchObject({
      state: "succeeded",
      result: { delivery_id: "msg-9" },
      attempts: 1,
    });
    expect(done.error).toBeUndefined();
    expect(done.updated_at).toBe(T2.toISOString());
  });

  it("keeps the id of the work a call started on an open record, through unknown, and refuses it on a final one", async () => {
    const { key, meta } = newKey();
    await store.claim(key, meta, T0);
    const started = await store.markStarted(key, "task-7", T1);
    expect(started).toMatchObject({ state: "pending", operation: "task-7", attempts: 1 });
    expect((await store.claim(key, meta, T1)).operation).toBe("task-7");
    const unknown = await store.markUnknown(
      key,
      { code: "tool.outcome_unknown", message: "a" },
      T1,
    );
    expect(unknown).toMatchObject({ state: "unknown", operation: "task-7" });
    await store.markSucceeded(key, { output_json: "{}" }, T2);
    await expect(store.markStarted(key, "task-8", T2)).rejects.toBeInstanceOf(
      SideEffectTransitionError,
    );
    await expect(store.markStarted(newKey().key, "task-9", T2)).rejects.toBeInstanceOf(
      SideEffectTransitionError,
    );
    expect((await store.get(key))?.operation).toBe("task-7");
  });

  it("never leaves succeeded: failed and unknown are refused, succeeded again is a no-op", async () => {
    const { key, meta } = newKey();
    await store.claim(key, meta, T0);
    await store.markSucceeded(key, { delivery_id: "msg-1" }, T1);
    const toFailed = store.markFailed(key, { code: "channel.rejected", message: "no" }, T2);
    await expect(toFailed).rejects.toBeInstanceOf(SideEffectTransitionError);
    await expect(toFailed).rejects.toMatchObject({
      code: "side_effect.invalid_transition",
      from: "succeeded",
      to: "failed",
      errorClass: "permanent",
    });
    await expect(
      store.markUnknown(key, { code: "channel.outcome_unknown", message: "?" }, T2),
    ).rejects.toMatchObject({ code: "side_effect.invalid_transition", from: "succeeded" });
    const again = await store.markSucceeded(key, { delivery_id: "msg-2" }, T2);
    expect(again).toMatchObject({ state: "succeeded", result: { delivery_id: "msg-1" } });
    expect(again.updated_at).toBe(T1.toISOString());
  });

  it("never leaves failed", async () => {
    const { key, meta } = newKey();
    await store.claim(key, meta, T0);
    const failed = await store.markFailed(key, { code: "channel.rejected", message: "no" }, T1);
    expect(failed).toMatchObject({ state: "failed", error: { code: "channel.rejected" } });
    await expect(store.markSucceeded(key, { delivery_id: "m" }, T2)).rejects.toMatchObject({
      code: "side_effect.invalid_transition",
      from: "failed",
      to: "succeeded",
    });
    await expect(
      store.markUnknown(key, { code: "channel.outcome_unknown", message: "?" }, T2),
    ).rejects.toBeInstanceOf(SideEffectTransitionError);
    expect((await store.markFailed(key, { code: "x", message: "y" }, T2)).error?.code).toBe(
      "channel.rejected",
    );
  });

  it("refuses a transition of a key that was never claimed", async () => {
    const { key } = newKey();
    await expect(store.markSucceeded(key, { delivery_id: "m" }, T0)).rejects.toMatchObject({
      code: "side_effect.not_found",
    });
    expect(await store.get(key)).toBeUndefined();
  });

  it("ends racing transitions in one final state", async () => {
    const { key, meta } = newKey();
    await store.claim(key, meta, T0);
    const results = await Promise.allSettled([
      store.markSucceeded(key, { delivery_id: "m" }, T1),
      store.markFailed(key, { code: "channel.rejected", message: "no" }, T1),
    ]);
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won.length).toBeGreaterThanOrEqual(1);
    for (const r of results)
      if (r.status === "rejected") expect(r.reason).toBeInstanceOf(SideEffectTransitionError);
    const final = await store.get(key);
    expect(["succeeded", "failed"]).toContain(final?.state);
    if (serializesItemWrites) expect(won).toHaveLength(1);
    // Whatever won is final.
    const other = final?.state === "succeeded" ? "failed" : "succeeded";
    const move =
      other === "failed"
        ? store.markFailed(key, { code: "x", message: "y" }, T2)
        : store.markSucceeded(key, { delivery_id: "z" }, T2);
    await expect(move).rejects.toBeInstanceOf(SideEffectTransitionError);
  });

  it("maps throttling to TransientError and other client errors to PermanentError", async () => {
    const throttled = new DynamoSideEffects({
      tableName,
      client: {
        send: async () => {
          throw new ProvisionedThroughputExceededException({
            message: "slow down",
            $metadata: {},
          });
        },
      } as unknown as AwsClient,
    });
    const { key, meta } = newKey();
    await expect(throttled.claim(key, meta, T0)).rejects.toBeInstanceOf(TransientError);
    const missing = new DynamoSideEffects({
      client: fromSdk(client),
      tableName: `${tableName}-absent`,
    });
    await expect(missing.claim(key, meta, T0)).rejects.toBeInstanceOf(PermanentError);
  });
});
