import type { AttributeValue, CancellationReason } from "@aws-sdk/client-dynamodb";
import { ToolRejectedError } from "../../core/agent/tool";
import { type AgentBusError, PermanentError, TransientError } from "../../core/errors";
import type {
  PaymentsPort,
  RefundQueryAnswer,
  RefundReceipt,
  RefundRequest,
} from "../../core/payments";
import type { Clock, IdSource } from "../../core/ports";
import { systemClock, ulidSource } from "../../core/runtime";
import type { AwsClient } from "../aws/client";
import { GetItem, TransactWriteItems } from "../aws/operations";
import { dynamoFailure } from "./failure";

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
 * It keeps the rules a provider keeps, the ones the agent loop relies on:
 *
 * - a key is applied at most once: a second refund under a key answers the first's receipt (even
 *   when the second asks for another order or amount: a retry is answered from what was done);
 * - an order is refunded at most once: a refund of an order already refunded under another key is
 *   refused (ToolRejectedError `payment.already_refunded`), nothing applied.
 *
 * Items: `refund#<key>` and `order#<order_id>`, each with the receipt (`refund_id`, `order_id`,
 * `amount_cents`), the `key` and `refunded_at`. A refund is one TransactWriteItems putting both,
 * each on condition that it is not there yet (two write units per item: four for a refund).
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
    const put = (pk: string) => ({
      Put: {
        TableName: this.tableName,
        Item: attributes(pk),
        ConditionExpression: NOT_THERE,
        ExpressionAttributeNames: { "#pk": PAYMENTS_STAND_IN_KEY },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
      },
    });
    try {
      await this.client.send(
        TransactWriteItems({
          TransactItems: [put(refundItemKey(request.key)), put(orderRefundKey(request.order_id))],
        }),
      );
      return receipt;
    } catch (error) {
      if (!isNamed(error, "TransactionCanceledException"))
        throw dynamoFailure(error, "TransactWriteItems (refund) on the payments stand-in table");
      const reasons = (error as { CancellationReasons?: CancellationReason[] }).CancellationReasons;
      const [byKey, byOrder] = reasons ?? [];
      if (byKey?.Code === "ConditionalCheckFailed") {
        // A retry under the key: the first refund's receipt.
        const stored = byKey.Item && Object.keys(byKey.Item).length > 0 ? byKey.Item : undefined;
        const first = stored ? receiptOf(stored) : await this.receiptAt(refundItemKey(request.key));
        if (first) return first;
      }
      if (byOrder?.Code === "ConditionalCheckFailed")
        throw new ToolRejectedError(
          "payment.already_refunded",
          `order ${request.order_id} has been refunded already; it is not refunded twice`,
          { details: { order_id: request.order_id } },
        );
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
