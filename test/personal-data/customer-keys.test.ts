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
  CONVERSATIONS_PER_PAGE,
  DynamoCustomerKeys,
  pageKey,
} from "../../functions/adapters/dynamodb/customer-keys";
import {
  type CustomerKeyStore,
  InMemoryCustomerKeys,
} from "../../functions/core/personal-data/customer-keys";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";

/** The customer keys behave alike in memory and on DynamoDB (against the emulator). */

const tableName = `customer-keys-${ulid().toLowerCase()}`;
let client: DynamoDBClient;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
      BillingMode: "PAY_PER_REQUEST",
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: tableName });
});

afterAll(async () => {
  await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
  client.destroy();
});

const stores: [string, () => CustomerKeyStore][] = [
  ["in memory", () => new InMemoryCustomerKeys()],
  ["on DynamoDB", () => new DynamoCustomerKeys({ client: fromSdk(client), tableName })],
];

const wrapped = (n: number) => new Uint8Array([n, n, n]);

describe.each(stores)("the customer keys %s", (_name, make) => {
  const subject = () => ({ tenant: "acme", customer: `cust_${ulid()}` });

  it("keeps the first key made and answers it to a second maker", async () => {
    const keys = make();
    const who = subject();
    expect(await keys.customer(who)).toBeUndefined();
    const first = await keys.createKey(who, { keyId: "k1", wrapped: wrapped(1) }, new Date());
    const second = await keys.createKey(who, { keyId: "k2", wrapped: wrapped(2) }, new Date());
    expect(first.keyId).toBe("k1");
    expect(second.keyId).toBe("k1");
    expect([...(second.wrapped ?? [])]).toEqual([1, 1, 1]);
    expect((await keys.customer(who))?.key?.keyId).toBe("k1");
  });

  it("lets the first claim of a conversation stand and lists it under its owner", async () => {
    const keys = make();
    const [alice, mallory] = [subject(), subject()];
    const conversation = `conv_${ulid()}`;
    expect(await keys.claimConversation(conversation, alice)).toEqual(alice);
    expect(await keys.claimConversation(conversation, mallory)).toEqual(alice);
    expect(await keys.ownerOf(conversation)).toEqual(alice);
    expect(await keys.ownerOf(`conv_${ulid()}`)).toBeUndefined();
    expect(await keys.conversationsOf(alice)).toEqual([conversation]);
    expect(await keys.conversationsOf(mallory)).toEqual([]);
  });

  it("erases a key once, records who and when, and keeps the conversations", async () => {
    const keys = make();
    const who = subject();
    const conversation = `conv_${ulid()}`;
    await keys.claimConversation(conversation, who);
    await keys.createKey(who, { keyId: "k1", wrapped: wrapped(1) }, new Date());
    const erasure = { at: "2026-12-02T10:00:00.000Z", by: "ops", reason: "customer asked" };
    expect(await keys.eraseKey(who, "k1", erasure)).toBe(true);
    expect(await keys.eraseKey(who, "k1", erasure)).toBe(false);
    const record = await keys.customer(who);
    expect(record?.key).toBeUndefined();
    expect(record?.erased).toEqual(erasure);
    expect(await keys.conversationsOf(who)).toEqual([conversation]);
    const next = await keys.createKey(who, { keyId: "k2", wrapped: wrapped(2) }, new Date());
    expect(next.keyId).toBe("k2");
    expect(await keys.eraseKey(who, "k1", erasure)).toBe(false);
    expect((await keys.customer(who))?.key?.keyId).toBe("k2");
  });

  it("lists any number of a customer's conversations, each once", async () => {
    const keys = make();
    const who = subject();
    const conversations = Array.from(
      { length: 2 * CONVERSATIONS_PER_PAGE + 5 },
      (_, i) => `conv_${String(i).padStart(2, "0")}_${ulid()}`,
    );
    for (const conversation of conversations) await keys.claimConversation(conversation, who);
    await keys.claimConversation(conversations[0] as string, who);
    const listed = await keys.conversationsOf(who);
    expect([...listed].sort()).toEqual(conversations);
  });
});

describe("the customer keys on DynamoDB", () => {
  it("keeps no list item past CONVERSATIONS_PER_PAGE ids, whatever the customer's history", async () => {
    const keys = new DynamoCustomerKeys({ client: fromSdk(client), tableName });
    const who = { tenant: "acme", customer: `cust_${ulid()}` };
    const total = 2 * CONVERSATIONS_PER_PAGE + 5;
    for (let i = 0; i < total; i++) await keys.claimConversation(`conv_${ulid()}`, who);
    const sizes: number[] = [];
    for (let page = 0; page < 3; page++) {
      const got = await client.send(
        new GetItemCommand({ TableName: tableName, Key: { pk: { S: pageKey(who, page) } } }),
      );
      sizes.push(got.Item?.conversations?.SS?.length ?? 0);
    }
    expect(sizes).toEqual([CONVERSATIONS_PER_PAGE, CONVERSATIONS_PER_PAGE, 5]);
  });
});
