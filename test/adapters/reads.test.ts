import {
  BatchWriteItemCommand,
  DynamoDBClient,
  type KeysAndAttributes,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  batchGetItems,
  QUERY_WHILE_MAX_PAGE,
  queryWhile,
} from "../../functions/adapters/dynamodb/reads";
import { SideEffectAttr, type TableNames } from "../../functions/adapters/dynamodb/tables";
import { TransientError } from "../../functions/core/errors";
import { meter } from "../../lib/dev/metering/metering";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { createTables, deleteTables } from "../support/tables";

let admin: DynamoDBClient;
let tables: TableNames;
const KEYS = Array.from({ length: 230 }, (_, i) => `effect-${String(i).padStart(3, "0")}`);

beforeAll(async () => {
  admin = new DynamoDBClient(emulator());
  tables = await createTables(admin, `reads-${newUlid().toLowerCase()}`);
  for (let i = 0; i < KEYS.length; i += 25) {
    await admin.send(
      new BatchWriteItemCommand({
        RequestItems: {
          [tables.sideEffects]: KEYS.slice(i, i + 25).map((key) => ({
            PutRequest: { Item: { [SideEffectAttr.effectKey]: { S: key } } },
          })),
        },
      }),
    );
  }
});

afterAll(async () => {
  await deleteTables(admin, tables);
  admin.destroy();
});

const keyOf = (key: string) => ({ [SideEffectAttr.effectKey]: { S: key } });

/** A client whose BatchGetItem answers with `respond` (above the SDK's retries). */
function clientWith(
  respond: (input: Record<string, KeysAndAttributes>, pass: () => Promise<unknown>) => unknown,
): DynamoDBClient {
  const client = new DynamoDBClient({ ...emulator(), maxAttempts: 1 });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== "BatchGetItemCommand") return next(args);
      const items = (args.input as { RequestItems: Record<string, KeysAndAttributes> })
        .RequestItems;
      const output = await respond(items, async () => (await next(args)).output);
      return { output, response: {} } as Awaited<ReturnType<typeof next>>;
    },
    { step: "initialize", name: "respond", override: true },
  );
  return client;
}

describe("batchGetItems", () => {
  it("reads any number of keys 100 at a time, retries what comes back unprocessed, leaves out what is missing", async () => {
    let held = true;
    const client = clientWith(async (items, pass) => {
      const keys = items[tables.sideEffects]?.Keys ?? [];
      if (!held || keys.length < 100) return pass();
      // Once, like DynamoDB under load: the last 40 keys of a full call come back unprocessed.
      held = false;
      const kept = { ...items[tables.sideEffects], Keys: keys.slice(0, 60) };
      items[tables.sideEffects] = kept;
      const output = (await pass()) as Record<string, unknown>;
      return { ...output, UnprocessedKeys: { [tables.sideEffects]: { Keys: keys.slice(60) } } };
    });
    const metered = meter(client);
    const asked = [...KEYS, "effect-missing"].map(keyOf);
    const items = await batchGetItems(fromSdk(client), tables.sideEffects, asked, {
      wait: async () => {},
    });
    expect(items.map((i) => i[SideEffectAttr.effectKey]).sort()).toEqual(KEYS);
    // 231 keys: calls of 100, 100 and 31, and one more round for the 40 held back.
    expect(metered.snapshot().calls.BatchGetItem).toBe(4);
    client.destroy();
  });

  it("gives up on keys that stay unprocessed with a TransientError, instead of dropping them", async () => {
    const client = clientWith(async (items) => ({ Responses: {}, UnprocessedKeys: items }));
    const reading = batchGetItems(
      fromSdk(client),
      tables.sideEffects,
      KEYS.slice(0, 3).map(keyOf),
      {
        maxAttempts: 3,
        wait: async () => {},
      },
    );
    await expect(reading).rejects.toBeInstanceOf(TransientError);
    await expect(reading).rejects.toMatchObject({ code: "dynamodb.unprocessed_keys" });
    client.destroy();
  });
});

describe("queryWhile", () => {
  it("stops at the first item refused, and doubles the pages it asks for up to a bound", async () => {
    const table = tables.events;
    const pk = `task#${newUlid()}`;
    const versions = Array.from({ length: 1600 }, (_, i) => i + 1);
    for (let i = 0; i < versions.length; i += 25)
      await admin.send(
        new BatchWriteItemCommand({
          RequestItems: {
            [table]: versions.slice(i, i + 25).map((version) => ({
              PutRequest: { Item: { pk: { S: pk }, version: { N: String(version) } } },
            })),
          },
        }),
      );
    const sdk = fromSdk(admin);
    const limits: (number | undefined)[] = [];
    const client = {
      send: ((command: { input: { Limit?: number } }) => {
        limits.push(command.input.Limit);
        return sdk.send(command as never);
      }) as typeof sdk.send,
    };
    const query = {
      TableName: table,
      KeyConditionExpression: "pk = :pk AND version >= :v",
      ExpressionAttributeValues: { ":pk": { S: pk }, ":v": { N: "1" } },
      Limit: 25,
    };
    const all = await queryWhile(client, query, () => true);
    expect(all.map((item) => item.version)).toEqual(versions);
    // 25 + 50 + ... + 800 = 1,575 items, then pages of the bound.
    expect(limits).toEqual([25, 50, 100, 200, 400, 800, QUERY_WHILE_MAX_PAGE]);
    limits.length = 0;
    const first = await queryWhile(client, query, (item) => Number(item.version) <= 30);
    expect(first.map((item) => item.version)).toEqual(versions.slice(0, 30));
    expect(limits).toEqual([25, 50]);
  });
});
