import type { PutItemCommandInput } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { PermanentError } from "../../../../kit";
import type { AwsClient } from "../../../../lambda";
import { dynamoFailure, GetItem, PutItem, UpdateItem } from "../../../../lambda";
import { OrderId, OrderRecord } from "../../events/conversation";
import type { OrdersPort } from "./port";

/**
 * OrdersPort on a DynamoDB orders table: partition key `order_id` (S), one item per order holding
 * the OrderRecord fields (`refund` as a map). Reads are GetItem; a row that is not a valid
 * OrderRecord is a PermanentError `orders.invalid_row` (retrying cannot fix it). AWS errors are
 * mapped like the event store's (throttling and outages -> TransientError).
 */
export const ORDERS_PARTITION_KEY = "order_id";
/** The refund key that claimed an order (set by `cancelForRefund`; not part of OrderRecord). */
export const REFUND_KEY_ATTRIBUTE = "refund_key";

export interface DynamoOrdersOptions {
  /** Strongly consistent reads. @default false */
  readonly consistentRead?: boolean;
}

export class DynamoOrders implements OrdersPort {
  constructor(
    private readonly client: AwsClient,
    private readonly tableName: string,
    private readonly options: DynamoOrdersOptions = {},
  ) {}

  async get(orderId: string): Promise<OrderRecord | undefined> {
    // Not an order number at all: there is no such row to read.
    if (!OrderId.safeParse(orderId).success) return undefined;
    let item: Record<string, unknown> | undefined;
    try {
      const out = await this.client.send(
        GetItem({
          TableName: this.tableName,
          Key: { [ORDERS_PARTITION_KEY]: { S: orderId } },
          ConsistentRead: this.options.consistentRead ?? false,
        }),
      );
      item = out.Item === undefined ? undefined : unmarshall(out.Item);
    } catch (error) {
      throw dynamoFailure(error, "GetItem");
    }
    if (item === undefined) return undefined;
    const parsed = OrderRecord.safeParse(item);
    if (!parsed.success || parsed.data.order_id !== orderId)
      throw new PermanentError(
        "orders.invalid_row",
        `the orders table ${this.tableName} holds an invalid row for order ${orderId}`,
        {
          details: {
            order_id: orderId,
            issues: parsed.success
              ? ["order_id: differs from the key"]
              : parsed.error.issues
                  .slice(0, 10)
                  .map((i) => `${i.path.map(String).join(".") || "(root)"}: ${i.message}`),
          },
        },
      );
    return parsed.data;
  }

  /**
   * One UpdateItem, conditional on the stored status and on no other refund key (attribute
   * `refund_key`, which it sets); a refusal reads the order to say why.
   */
  async cancelForRefund(
    orderId: string,
    refundKey: string,
    from: readonly OrderRecord["status"][],
  ) {
    if (!OrderId.safeParse(orderId).success || from.length === 0)
      return { cancelled: false as const, status: "missing" as const };
    const allowed = Object.fromEntries(from.map((status, i) => [`:from${i}`, { S: status }]));
    try {
      const out = await this.client.send(
        UpdateItem({
          TableName: this.tableName,
          Key: { [ORDERS_PARTITION_KEY]: { S: orderId } },
          UpdateExpression: "SET #status = :cancelled, #refund_key = :key",
          ConditionExpression: `attribute_exists(#key) AND #status IN (${Object.keys(allowed).join(", ")}) AND (attribute_not_exists(#refund_key) OR #refund_key = :key)`,
          ExpressionAttributeNames: {
            "#status": "status",
            "#key": ORDERS_PARTITION_KEY,
            "#refund_key": REFUND_KEY_ATTRIBUTE,
          },
          ExpressionAttributeValues: {
            ":cancelled": { S: "cancelled" },
            ":key": { S: refundKey },
            ...allowed,
          },
          ReturnValues: "ALL_NEW",
        }),
      );
      return {
        cancelled: true as const,
        order: OrderRecord.parse(unmarshall(out.Attributes ?? {})),
      };
    } catch (error) {
      if ((error as { name?: string } | null)?.name !== "ConditionalCheckFailedException")
        throw dynamoFailure(error, "UpdateItem");
    }
    return { cancelled: false as const, status: await this.refusal(orderId, from) };
  }

  /** Why a cancel for a refund was refused: no order, its status, or another key's claim. */
  private async refusal(
    orderId: string,
    from: readonly OrderRecord["status"][],
  ): Promise<OrderRecord["status"] | "missing" | "claimed"> {
    const order = await this.get(orderId);
    if (!order) return "missing";
    return from.includes(order.status) ? "claimed" : order.status;
  }
}

/** Writes orders to the orders table (seeding the local runtime and tests); validates each. */
export async function putOrders(
  client: AwsClient,
  tableName: string,
  orders: readonly OrderRecord[],
): Promise<void> {
  for (const order of orders) {
    const input: PutItemCommandInput = {
      TableName: tableName,
      Item: marshall(OrderRecord.parse(order), { removeUndefinedValues: true }),
    };
    try {
      await client.send(PutItem(input));
    } catch (error) {
      throw dynamoFailure(error, "PutItem");
    }
  }
}
