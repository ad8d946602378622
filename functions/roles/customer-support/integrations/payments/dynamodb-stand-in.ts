import type { AttributeValue, CancellationReason } from "@aws-sdk/client-dynamodb";
import type { Clock, IdSource } from "../../../../kit";
import {
  type AgentBusError,
  PermanentError,
  systemClock,
  TransientError,
  ulidSource,
} from "../../../../kit";
import type { AwsClient } from "../../../../lambda";
import { dynamoFailure, GetItem, TransactWriteItems } from "../../../../lambda";
import type { PaymentsPort, RefundQueryAnswer, RefundReceipt, RefundRequest } from "./port";

export interface DynamoPaymentsStandInOptions {
  readonly client: AwsClient;
  readonly tableName: string;
  /** Refund ids are `refund_<ULID>`. */
  readonly ids?: IdSource;
  readonly clock?: Clock;
}

/** The stand-in table's partition key. */
export const PAYMENTS_STAND_IN_KEY = "pk";

export function refundItemKey(key: string): string {
  return `refund#${key}`;
}

export function orderRefundKey(orderId: string): string {
  return `order#${orderId}`;
}

type Item = Record<string, AttributeValue>;

const NOT_THERE = "attribute_not_exists(#pk)";

/**
 * NOT a payment system. A stand-in for a payment provider, on a DynamoDB table of its own
 * (partition key `pk`, layout TABLES.paymentsStandIn), so that the reference stack, which has no
 * real provider to call, can run the refund agent end to end and keep its refunds across
 * invocations. No money moves. A team that refunds for real replaces it with an adapter for its
 * provider's API (the PaymentsPort: refund by idempotency key, query by key, an order's refund).
 *
 * It keeps the one rule a provider keeps that the agent loop relies on: a key is applied at most
 * once (a second refund under a key answers the first's receipt, even when it asks for another
 * order or amount: a retry is answered from what was done). Like a provider, it refunds an order
 * again under another key: keeping to one refund per order is the agent's part, so a defect there
 * shows (each order's item counts its refunds, `refunds`, which the chaos runs check).
 *
 * Items: `refund#<key>` with the receipt (`refund_id`, `order_id`, `amount_cents`), the `key` and
 * `refunded_at`; `order#<order_id>` with the order's latest receipt and its refund count. A refund
 * is one TransactWriteItems: the key's item put on condition that it is not there yet, the
 * order's item updated (two write units each: four for a refund).
 * Queries are strongly consistent GetItems. A refusal by DynamoDB (throttled, conflict, outage)
 * is a TransientError: nothing was applied, or the retry under the same key finds what was.
 */
export class DynamoPaymentsStandIn implements PaymentsPort {
  readonly name = "dynamodb-payments-stand-in";
  private readonly client: AwsClient;
  private readonly tableName: string;
  private readonly ids: IdSource;
  private readonly clock: Clock;

  constructor(options: DynamoPaymentsStandInOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? ulidSource(this.clock);
  }

  async refund(request: RefundRequest): Promise<RefundReceipt> {
    const receipt: RefundReceipt = {
      refund_id: `refund_${this.ids.next()}`,
      order_id: request.order_id,
      amount_cents: request.amount_cents,
    };
    const attributes = (pk: string): Item => ({
      [PAYMENTS_STAND_IN_KEY]: { S: pk },
      refund_id: { S: receipt.refund_id },
      order_id: { S: receipt.order_id },
      amount_cents: { N: String(receipt.amount_cents) },
      key: { S: request.key },
      refunded_at: { S: this.clock.now().toISOString() },
    });
    const byKey = {
      Put: {
        TableName: this.tableName,
        Item: attributes(refundItemKey(request.key)),
        ConditionExpression: NOT_THERE,
        ExpressionAttributeNames: { "#pk": PAYMENTS_STAND_IN_KEY },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
      },
    };
    const { [PAYMENTS_STAND_IN_KEY]: _pk, ...latest } = attributes("");
    const byOrder = {
      Update: {
        TableName: this.tableName,
        Key: { [PAYMENTS_STAND_IN_KEY]: { S: orderRefundKey(request.order_id) } },
        UpdateExpression: `SET ${Object.keys(latest)
          .map((name) => `#${name} = :${name}`)
          .join(", ")} ADD #refunds :one`,
        ExpressionAttributeNames: Object.fromEntries([
          ...Object.keys(latest).map((name) => [`#${name}`, name]),
          ["#refunds", "refunds"],
        ]),
        ExpressionAttributeValues: Object.fromEntries([
          ...Object.entries(latest).map(([name, value]) => [`:${name}`, value]),
          [":one", { N: "1" }],
        ]),
      },
    };
    try {
      await this.client.send(TransactWriteItems({ TransactItems: [byKey, byOrder] }));
      return receipt;
    } catch (error) {
      if (!isNamed(error, "TransactionCanceledException"))
        throw dynamoFailure(error, "TransactWriteItems (refund) on the payments stand-in table");
      const reasons = (error as { CancellationReasons?: CancellationReason[] }).CancellationReasons;
      const [onKey] = reasons ?? [];
      if (onKey?.Code === "ConditionalCheckFailed") {
        // A retry under the key: the first refund's receipt.
        const stored = onKey.Item && Object.keys(onKey.Item).length > 0 ? onKey.Item : undefined;
        const first = stored ? receiptOf(stored) : await this.receiptAt(refundItemKey(request.key));
        if (first) return first;
      }
      throw cancelled(reasons ?? [], error);
    }
  }

  async query(key: string): Promise<RefundQueryAnswer> {
    const receipt = await this.receiptAt(refundItemKey(key));
    return receipt ? { status: "applied", receipt } : { status: "not_applied" };
  }

  async refundOf(orderId: string): Promise<RefundReceipt | undefined> {
    return this.receiptAt(orderRefundKey(orderId));
  }

  /** How many refunds the order has had (more than one is a double refund). */
  async refundCount(orderId: string): Promise<number> {
    try {
      const output = await this.client.send(
        GetItem({
          TableName: this.tableName,
          Key: { [PAYMENTS_STAND_IN_KEY]: { S: orderRefundKey(orderId) } },
          ConsistentRead: true,
        }),
      );
      return Number(output.Item?.refunds?.N ?? 0);
    } catch (error) {
      throw dynamoFailure(error, "GetItem on the payments stand-in table");
    }
  }

  private async receiptAt(pk: string): Promise<RefundReceipt | undefined> {
    try {
      const output = await this.client.send(
        GetItem({
          TableName: this.tableName,
          Key: { [PAYMENTS_STAND_IN_KEY]: { S: pk } },
          ConsistentRead: true,
        }),
      );
      return output.Item ? receiptOf(output.Item) : undefined;
    } catch (error) {
      throw dynamoFailure(error, "GetItem on the payments stand-in table");
    }
  }
}

function receiptOf(item: Item): RefundReceipt {
  return {
    refund_id: String(item.refund_id?.S),
    order_id: String(item.order_id?.S),
    amount_cents: Number(item.amount_cents?.N),
  };
}

function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

/** A cancelled refund with no condition failed: nothing was applied. */
function cancelled(reasons: readonly CancellationReason[], cause: unknown): AgentBusError {
  const codes = reasons.map((r) => r.Code ?? "None");
  const message = `refund cancelled by DynamoDB: [${codes.join(", ")}]`;
  if (codes.includes("ValidationError"))
    return new PermanentError("dynamodb.validation", message, { cause });
  if (codes.includes("ThrottlingError") || codes.includes("ProvisionedThroughputExceeded"))
    return new TransientError("dynamodb.throttled", message, { cause });
  if (codes.includes("TransactionConflict"))
    return new TransientError("dynamodb.transaction_conflict", message, { cause });
  return new TransientError("dynamodb.transaction_cancelled", message, { cause });
}
