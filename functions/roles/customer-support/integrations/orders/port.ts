import type { OrderRecord } from "../../events/conversation";

/** Where the orders live (on AWS, a DynamoDB table: ./dynamodb.ts). */
export interface OrdersPort {
  /** The order with this id, whoever's it is; undefined when there is none. */
  get(orderId: string): Promise<OrderRecord | undefined>;
  /**
   * Cancel the order for a refund made under `refundKey`, with one conditional write: only when
   * its stored status is one of `from` and no other refund key has claimed it (the same key may
   * claim it again: a retry). The order then records the key (`refund_key`), so at most one
   * refund is ever made of an order and only of a cancelled one. Answers the cancelled order, or
   * why not: its status, `claimed` (by another key) or `missing`. Roles that only read leave it out.
   */
  cancelForRefund?(
    orderId: string,
    refundKey: string,
    from: readonly OrderRecord["status"][],
  ): Promise<
    | { readonly cancelled: true; readonly order: OrderRecord }
    | {
        readonly cancelled: false;
        readonly status: OrderRecord["status"] | "missing" | "claimed";
      }
  >;
}
