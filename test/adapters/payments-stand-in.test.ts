import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  ScanCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import { ToolRejectedError } from "../../functions/core/agent/tool";
import { TransientError } from "../../functions/core/errors";
import { ManualClock } from "../../functions/core/runtime";
import { DynamoPaymentsStandIn } from "../../functions/roles/customer-support/integrations/payments/dynamodb-stand-in";
import { LocalPayments } from "../../functions/roles/customer-support/integrations/payments/memory";
import type { PaymentsPort } from "../../functions/roles/customer-support/integrations/payments/port";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { newTaskId, newUlid } from "../support/factories";
import { createTableInput } from "../support/tables";

const tableName = `payments-stand-in-${newUlid().toLowerCase()}`;
let client: DynamoDBClient;
let payments: DynamoPaymentsStandIn;
const clock = new ManualClock("2026-09-01T10:00:00.000Z");

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  await client.send(new CreateTableCommand(createTableInput(tableName, TABLES.paymentsStandIn)));
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: tableName });
  payments = new DynamoPaymentsStandIn({ client: fromSdk(client), tableName, clock });
});

afterAll(async () => {
  await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
  client.destroy();
});

/** A fresh order id and tool call key (the table is shared by the file's tests). */
const newOrder = () => `T-${newUlid()}`;
const newKey = () => `${newTaskId()}:run_${newUlid()}:call_2_1`;

/** The stand-in's items whose key names this order or these keys. */
async function itemsOf(orderId: string, keys: readonly string[]) {
  const wanted = new Set([`order#${orderId}`, ...keys.map((k) => `refund#${k}`)]);
  const page = await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }));
  return (page.Items ?? [])
    .map((item) => unmarshall(item))
    .filter((item) => wanted.has(String(item.pk)))
    .sort((a, b) => String(a.pk).localeCompare(String(b.pk)));
}

describe("DynamoPaymentsStandIn", () => {
  it("applies a key once: a retry under it answers the first receipt", async () => {
    const order = newOrder();
    const key = newKey();
    const receipt = await payments.refund({ key, order_id: order, amount_cents: 3450 });
    expect(receipt).toEqual({
      refund_id: expect.stringMatching(/^refund_[0-9A-HJKMNP-TV-Z]{26}$/),
      order_id: order,
      amount_cents: 3450,
    });
    expect(await payments.refund({ key, order_id: order, amount_cents: 3450 })).toEqual(receipt);
    // Even a retry that asks for something else is answered from what was done.
    expect(await payments.refund({ key, order_id: newOrder(), amount_cents: 1 })).toEqual(receipt);
    const stored = { ...receipt, key, refunded_at: "2026-09-01T10:00:00.000Z" };
    expect(await itemsOf(order, [key])).toEqual([
      { pk: `order#${order}`, ...stored, refunds: 1 },
      { pk: `refund#${key}`, ...stored },
    ]);
  });

  it("answers a query by key: applied with the receipt, or not applied", async () => {
    const order = newOrder();
    const key = newKey();
    expect(await payments.query(key)).toEqual({ status: "not_applied" });
    const receipt = await payments.refund({ key, order_id: order, amount_cents: 999 });
    expect(await payments.query(key)).toEqual({ status: "applied", receipt });
    expect(await payments.query(newKey())).toEqual({ status: "not_applied" });
  });

  it("answers an order's refund, or undefined for an order never refunded", async () => {
    const order = newOrder();
    expect(await payments.refundOf(order)).toBeUndefined();
    const receipt = await payments.refund({ key: newKey(), order_id: order, amount_cents: 12900 });
    expect(await payments.refundOf(order)).toEqual(receipt);
    expect(await payments.refundOf(newOrder())).toBeUndefined();
  });

  it("refunds an order again under another key, as a provider does, and counts its refunds", async () => {
    const order = newOrder();
    const first = newKey();
    const second = newKey();
    await payments.refund({ key: first, order_id: order, amount_cents: 500 });
    expect(await payments.refundCount(order)).toBe(1);
    const again = await payments.refund({ key: second, order_id: order, amount_cents: 500 });
    expect(await payments.query(second)).toEqual({ status: "applied", receipt: again });
    expect(await payments.refundOf(order)).toEqual(again);
    expect(await payments.refundCount(order)).toBe(2);
    // A retry under a key counts nothing.
    await payments.refund({ key: second, order_id: order, amount_cents: 500 });
    expect(await payments.refundCount(order)).toBe(2);
    expect((await itemsOf(order, [first, second])).map((i) => i.pk).sort()).toEqual([
      `order#${order}`,
      `refund#${first}`,
      `refund#${second}`,
    ]);
  });

  it("maps an unreachable table service to a TransientError", async () => {
    const down = new DynamoDBClient({
      ...emulator(),
      endpoint: "http://127.0.0.1:9",
      maxAttempts: 1,
    });
    try {
      const unreachable = new DynamoPaymentsStandIn({ client: fromSdk(down), tableName });
      const error = await unreachable
        .refund({ key: newKey(), order_id: newOrder(), amount_cents: 1 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TransientError);
      expect(error).toMatchObject({ code: "dynamodb.unavailable" });
    } finally {
      down.destroy();
    }
  });
});

describe("LocalPayments and DynamoPaymentsStandIn", () => {
  /**
   * The same steps on a PaymentsPort, each step's answer (refund ids replaced by the order in
   * which they first appear, as the two make them differently; a refusal by its class and code).
   */
  async function script(port: PaymentsPort, order: string, other: string) {
    const [first, second, third, never] = [newKey(), newKey(), newKey(), newKey()];
    const ids = new Map<string, string>();
    const plain = (value: unknown): unknown => {
      if (value === undefined) return "undefined";
      return JSON.parse(
        JSON.stringify(value, (k, v) => {
          if (k !== "refund_id") return v;
          if (!ids.has(v)) ids.set(v, `refund-${ids.size + 1}`);
          return ids.get(v);
        }),
      );
    };
    const step = async (name: string, run: () => Promise<unknown>) => {
      try {
        return [name, plain(await run())];
      } catch (error) {
        const e = error as Error & { code?: string };
        return [name, `${e instanceof ToolRejectedError ? "rejected" : e.name} ${e.code}`];
      }
    };
    const refund = (key: string, order_id: string, amount_cents: number) =>
      port.refund({ key, order_id, amount_cents });
    const named = (v: unknown) =>
      JSON.parse(
        JSON.stringify(v ?? null)
          .replaceAll(order, "O1")
          .replaceAll(other, "O2"),
      );
    const steps = [
      await step("query before", () => port.query(first)),
      await step("refundOf before", () => port.refundOf(order)),
      await step("refund", () => refund(first, order, 3450)),
      await step("refund again, same key", () => refund(first, order, 3450)),
      await step("query", () => port.query(first)),
      await step("query of a key never used", () => port.query(never)),
      await step("refundOf", () => port.refundOf(order)),
      await step("refundOf another order", () => port.refundOf(other)),
      await step("refund, another key for the order", () => refund(second, order, 100)),
      await step("query of that key", () => port.query(second)),
      await step("refund of another order", () => refund(third, other, 2599)),
      await step("refundOf after", () => port.refundOf(order)),
      await step("refundOf the other after", () => port.refundOf(other)),
    ];
    return named(steps);
  }

  it("answer the same steps the same way", async () => {
    const local = await script(new LocalPayments(), newOrder(), newOrder());
    const dynamo = await script(payments, newOrder(), newOrder());
    expect(dynamo).toEqual(local);
    // What both answered, so that agreeing on a wrong answer is caught too.
    expect(local).toEqual([
      ["query before", { status: "not_applied" }],
      ["refundOf before", "undefined"],
      ["refund", { refund_id: "refund-1", order_id: "O1", amount_cents: 3450 }],
      ["refund again, same key", { refund_id: "refund-1", order_id: "O1", amount_cents: 3450 }],
      [
        "query",
        {
          status: "applied",
          receipt: { refund_id: "refund-1", order_id: "O1", amount_cents: 3450 },
        },
      ],
      ["query of a key never used", { status: "not_applied" }],
      ["refundOf", { refund_id: "refund-1", order_id: "O1", amount_cents: 3450 }],
      ["refundOf another order", "undefined"],
      // A provider refunds an order again under another key; one per order is the agent's part.
      [
        "refund, another key for the order",
        { refund_id: "refund-2", order_id: "O1", amount_cents: 100 },
      ],
      [
        "query of that key",
        {
          status: "applied",
          receipt: { refund_id: "refund-2", order_id: "O1", amount_cents: 100 },
        },
      ],
      ["refund of another order", { refund_id: "refund-3", order_id: "O2", amount_cents: 2599 }],
      ["refundOf after", { refund_id: "refund-2", order_id: "O1", amount_cents: 100 }],
      ["refundOf the other after", { refund_id: "refund-3", order_id: "O2", amount_cents: 2599 }],
    ]);
  });
});
