import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PermanentError, TransientError } from "../../functions/core/errors";
import { OrderRecord } from "../../functions/roles/customer-support/events/conversation";
import {
  DynamoOrders,
  putOrders,
} from "../../functions/roles/customer-support/integrations/orders/dynamodb";
import { SAMPLE_ORDERS } from "../../functions/roles/customer-support/integrations/orders/sample-orders";
import { fromSdk } from "../../lib/operator/from-sdk";
import { opaqueIdProblem } from "../../schemas/ids";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";

let client: DynamoDBClient;
let table: string;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  table = `orders-${newUlid().toLowerCase()}`;
  await client.send(
    new CreateTableCommand({
      TableName: table,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [{ AttributeName: "order_id", AttributeType: "S" }],
      KeySchema: [{ AttributeName: "order_id", KeyType: "HASH" }],
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: table });
  await putOrders(fromSdk(client), table, SAMPLE_ORDERS);
});

afterAll(async () => {
  await client.send(new DeleteTableCommand({ TableName: table }));
  client.destroy();
});

describe("SAMPLE_ORDERS", () => {
  it("are valid orders of a few customers with the cases the workflow needs", () => {
    for (const order of SAMPLE_ORDERS) {
      expect(OrderRecord.safeParse(order).success, order.order_id).toBe(true);
      expect(opaqueIdProblem(order.customer_id), order.customer_id).toBeUndefined();
    }
    expect(SAMPLE_ORDERS.length).toBeGreaterThanOrEqual(5);
    expect(SAMPLE_ORDERS.length).toBeLessThanOrEqual(8);
    expect(new Set(SAMPLE_ORDERS.map((o) => o.order_id)).size).toBe(SAMPLE_ORDERS.length);
    expect(new Set(SAMPLE_ORDERS.map((o) => o.customer_id)).size).toBeGreaterThanOrEqual(3);
    expect(SAMPLE_ORDERS.some((o) => o.refund?.status === "submitted")).toBe(true);
    expect(
      SAMPLE_ORDERS.some(
        (o) => o.status === "delivered" && (o.refund === undefined || o.refund.status === "none"),
      ),
    ).toBe(true);
    expect(SAMPLE_ORDERS.some((o) => o.status === "cancelled")).toBe(true);
  });
});

describe("DynamoOrders", () => {
  it("reads back every seeded order as written", async () => {
    const orders = new DynamoOrders(fromSdk(client), table, { consistentRead: true });
    for (const order of SAMPLE_ORDERS) expect(await orders.get(order.order_id)).toEqual(order);
  });

  it("answers undefined for a missing order or a string that is no order number", async () => {
    const orders = new DynamoOrders(fromSdk(client), table);
    expect(await orders.get("999")).toBeUndefined();
    expect(await orders.get("")).toBeUndefined();
    expect(await orders.get("not an id!")).toBeUndefined();
  });

  it("refuses an invalid row with permanent orders.invalid_row", async () => {
    await client.send(
      new PutItemCommand({
        TableName: table,
        Item: marshall({ order_id: "BAD-1", customer_id: "cust_alice", status: "lost" }),
      }),
    );
    const error = await new DynamoOrders(fromSdk(client), table)
      .get("BAD-1")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({ code: "orders.invalid_row" });
    expect(JSON.stringify((error as PermanentError).details)).toContain("status");
  });

  it("refuses to seed an invalid order", async () => {
    const invalid = { ...SAMPLE_ORDERS[0], currency: "dollars" } as OrderRecord;
    await expect(putOrders(fromSdk(client), table, [invalid])).rejects.toThrow();
  });

  it("maps an unreachable table service to a TransientError", async () => {
    const down = new DynamoDBClient({
      ...emulator(),
      endpoint: "http://127.0.0.1:9",
      maxAttempts: 1,
    });
    try {
      const error = await new DynamoOrders(fromSdk(down), table)
        .get("123")
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TransientError);
      expect(error).toMatchObject({ code: "dynamodb.unavailable" });
    } finally {
      down.destroy();
    }
  });

  describe("cancelForRefund", () => {
    /** An order of its own (the seeded ones are read back as written above). */
    const seeded = async (status: OrderRecord["status"]) => {
      const order: OrderRecord = {
        ...(SAMPLE_ORDERS[2] as OrderRecord),
        order_id: `X-${newUlid()}`,
        status,
      };
      await putOrders(fromSdk(client), table, [order]);
      return order;
    };
    const consistent = () => new DynamoOrders(fromSdk(client), table, { consistentRead: true });
    /** The order's item as stored, every attribute. */
    const rawItems = async (orderId: string) => {
      const out = await client.send(
        new GetItemCommand({
          TableName: table,
          Key: { order_id: { S: orderId } },
          ConsistentRead: true,
        }),
      );
      return out.Item ? [unmarshall(out.Item)] : [];
    };

    it("cancels an order in a status it may be cancelled from, and answers the order", async () => {
      const order = await seeded("delivered");
      const orders = consistent();
      const answer = await orders.cancelForRefund(order.order_id, "k1", ["placed", "delivered"]);
      expect(answer).toEqual({ cancelled: true, order: { ...order, status: "cancelled" } });
      expect(await orders.get(order.order_id)).toEqual({ ...order, status: "cancelled" });
      // The same key again (a retry) is allowed when `from` lists cancelled, and changes nothing.
      expect(
        await orders.cancelForRefund(order.order_id, "k1", ["delivered", "cancelled"]),
      ).toEqual(answer);
    });

    it("refuses a second refund key for an order another key claimed", async () => {
      const order = await seeded("cancelled");
      const orders = consistent();
      const first = await orders.cancelForRefund(order.order_id, "k1", ["cancelled"]);
      expect(first.cancelled).toBe(true);
      expect(await orders.cancelForRefund(order.order_id, "k2", ["cancelled"])).toEqual({
        cancelled: false,
        status: "claimed",
      });
      const [item] = await rawItems(order.order_id);
      expect(item?.refund_key).toBe("k1");
    });

    it("refuses an order in another status: answers that status and changes nothing", async () => {
      const order = await seeded("shipped");
      const orders = consistent();
      expect(await orders.cancelForRefund(order.order_id, "k1", ["placed", "delivered"])).toEqual({
        cancelled: false,
        status: "shipped",
      });
      expect(await orders.get(order.order_id)).toEqual(order);
      const cancelled = await seeded("cancelled");
      expect(await orders.cancelForRefund(cancelled.order_id, "k1", ["placed"])).toEqual({
        cancelled: false,
        status: "cancelled",
      });
    });

    it("answers missing for an order that does not exist, and writes none", async () => {
      const orders = consistent();
      const id = `X-${newUlid()}`;
      expect(await orders.cancelForRefund(id, "k1", ["placed", "delivered"])).toEqual({
        cancelled: false,
        status: "missing",
      });
      expect(await orders.get(id)).toBeUndefined();
      expect(await orders.cancelForRefund("not an id!", "k1", ["placed"])).toEqual({
        cancelled: false,
        status: "missing",
      });
    });
  });

  it("maps a missing table to a PermanentError", async () => {
    const error = await new DynamoOrders(fromSdk(client), `${table}-missing`)
      .get("123")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
  });
});
