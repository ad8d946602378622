import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ScanCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONTENT_TEXT_ATTRIBUTE,
  contentKey,
  DynamoContentStore,
  MAX_CONTENT_BYTES,
} from "../../functions/adapters/dynamodb/content";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import { contentRef } from "../../functions/core/agent/content";
import { PermanentError } from "../../functions/core/errors";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { createTableInput } from "../support/tables";

const tableName = `content-state-${newUlid().toLowerCase()}`;
let client: DynamoDBClient;
let store: DynamoContentStore;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  // The state table as deployed (its sparse indexes too): the content items share it.
  await client.send(new CreateTableCommand(createTableInput(tableName, TABLES.state)));
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: tableName });
  store = new DynamoContentStore({ client: fromSdk(client), tableName });
});

afterAll(async () => {
  await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
  client.destroy();
});

const stored = async (ref: string) =>
  (
    await client.send(
      new GetItemCommand({
        TableName: tableName,
        Key: { pk: { S: contentKey(ref) } },
        ConsistentRead: true,
      }),
    )
  ).Item;

describe("DynamoContentStore", () => {
  it("stores one text apart for each scope, each read back and overwritten alone", async () => {
    const text = '{"found":false}';
    const [mine, theirs] = ["agent_run#rrun_mine", "agent_run#rrun_theirs"];
    const refs = [
      await store.put(text, mine),
      await store.put(text, theirs),
      await store.put(text),
    ];
    expect(refs).toEqual([contentRef(text, mine), contentRef(text, theirs), contentRef(text)]);
    expect(new Set(refs).size).toBe(3);
    await store.overwrite(refs[0] as string, '"[erased]"');
    expect(await store.getMany(refs)).toEqual(['"[erased]"', text, text]);
  });

  it("stores a text under its SHA-256 and reads it back, unicode included", async () => {
    const texts = [
      "The customer asks where the refund of order 456 is.",
      "Ünïcödé: 退款 🧾 — ça va? \u0000 and a tab\t",
      "",
    ];
    const refs = [];
    for (const text of texts) {
      const ref = await store.put(text);
      expect(ref).toBe(contentRef(text));
      expect(ref).toMatch(/^[0-9a-f]{64}$/);
      refs.push(ref);
    }
    expect(await store.getMany(refs)).toEqual(texts);
    expect(await stored(refs[1] as string)).toEqual({
      pk: { S: `content#${refs[1]}` },
      [CONTENT_TEXT_ATTRIBUTE]: { S: texts[1] },
    });
  });

  it("stores the same text once under one reference however often it is put", async () => {
    const text = `a model turn ${newUlid()}`;
    const first = await store.put(text);
    const second = await store.put(text);
    expect(second).toBe(first);
    expect(await store.getMany([first])).toEqual([text]);
    const items = await client.send(
      new ScanCommand({
        TableName: tableName,
        FilterExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": { S: contentKey(first) } },
      }),
    );
    expect(items.Items).toHaveLength(1);
  });

  it("answers in the order asked, a reference asked twice twice", async () => {
    const [a, b, c] = ["alpha", "beta", "gamma"].map((t) => `${t} ${newUlid()}`) as [
      string,
      string,
      string,
    ];
    const [ra, rb, rc] = [await store.put(a), await store.put(b), await store.put(c)];
    expect(await store.getMany([rc, ra, rb, ra, rc, rc])).toEqual([c, a, b, a, c, c]);
    expect(await store.getMany([])).toEqual([]);
  });

  it("refuses a reference that is not stored with permanent content.missing", async () => {
    const ref = await store.put(`kept ${newUlid()}`);
    const absent = contentRef(`never stored ${newUlid()}`);
    const error = await store.getMany([ref, absent]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({ code: "content.missing", details: { ref: absent } });
  });

  it("refuses a text over the limit with content.too_large and writes nothing", async () => {
    // Within the limit by bytes, at its edge: stored.
    const edge = `${"x".repeat(MAX_CONTENT_BYTES - 4)}€`;
    expect(Buffer.byteLength(edge)).toBe(MAX_CONTENT_BYTES - 1);
    const edgeRef = await store.put(edge);
    expect(await store.getMany([edgeRef])).toEqual([edge]);
    // Under the limit in characters, over it in UTF-8 bytes.
    const large = "€".repeat(Math.ceil(MAX_CONTENT_BYTES / 3) + 1);
    expect(large.length).toBeLessThan(MAX_CONTENT_BYTES);
    const error = await store.put(large).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({
      code: "content.too_large",
      details: { bytes: Buffer.byteLength(large), limit: MAX_CONTENT_BYTES },
    });
    expect(await stored(contentRef(large))).toBeUndefined();
  });

  it("reads more than 100 references (one BatchGetItem's limit) in one call", async () => {
    const texts = Array.from({ length: 230 }, (_, i) => `tool result ${i} ${newUlid()}`);
    const refs = await Promise.all(texts.map((t) => store.put(t)));
    const asked = [...refs, ...refs.slice(0, 20).reverse()];
    const expected = [...texts, ...texts.slice(0, 20).reverse()];
    expect(await store.getMany(asked)).toEqual(expected);
  });

  it("writes no entry to the state table's sparse indexes", async () => {
    const ref = await store.put(`indexed? ${newUlid()}`);
    const item = await stored(ref);
    const indexKeys: string[] = TABLES.state.indexes.flatMap((i) => [
      i.partitionKey.name,
      i.sortKey?.name ?? "",
    ]);
    expect(Object.keys(item ?? {}).filter((a) => indexKeys.includes(a))).toEqual([]);
  });
});
