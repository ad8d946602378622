import { describe, expect, it } from "vitest";
import { TransientError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { ConsumeResult, Role } from "../../functions/core/role";
import { recordConsumed } from "../../functions/handlers/consumer-metrics";
import type { Observability } from "../../functions/handlers/observe";
import type { ConversationView } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import type { SupportCancelled } from "../../functions/roles/customer-support/events/cancel";
import type {
  OrderRecord,
  SendRequested,
} from "../../functions/roles/customer-support/events/conversation";
import type { OrdersPort } from "../../functions/roles/customer-support/integrations/orders/port";
import { SAMPLE_ORDERS } from "../../functions/roles/customer-support/integrations/orders/sample-orders";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import { restsOn, stillHolds } from "../../functions/roles/customer-support/sender/facts";
import {
  DELIVERED,
  NOT_SENT,
  replyKey,
} from "../../functions/roles/customer-support/sender/sender";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import type { Envelope } from "../../schemas";
import { clientMessage } from "./fixtures";
import { newConversationId, operatorCommand, supportHarness } from "./support-fixture";

/**
 * The sender discards a reply that no longer holds (seed 000 §11.5): `invalidated_by_state_change`
 * when the order it rests on changed after the lookup, `cancelled` once its turn was cancelled.
 * Neither reaches the channel; a send already claimed is resolved, never dropped; a reply already
 * delivered stays delivered. The conversation runs through every support role on in-memory
 * adapters, with a mutable orders table.
 */

const SEND = "notification.send.requested";
const ORDER_123 = SAMPLE_ORDERS.find((o) => o.order_id === "123") as OrderRecord;

/**
 * The support roles with a mutable orders table (that can also be down); send commands are held
 * back from the drain and handed to the sender by the test (`toSender`).
 */
function harness() {
  const table = new Map(SAMPLE_ORDERS.map((o) => [o.order_id, o]));
  let ordersDown = false;
  const orders: OrdersPort = {
    get: async (id) => {
      if (ordersDown) throw new TransientError("dynamodb.throttled", "orders throttled");
      return table.get(id);
    },
  };
  const h = supportHarness({ orders, without: ["sender"] });
  /** Hands an event to the sender, then its facts to the others. */
  async function toSender(event: Envelope, receiveCount = 1): Promise<ConsumeResult> {
    const result = await consume(event, h.sender as Role<unknown>, h.deps, { receiveCount });
    const facts = result.steps.flatMap((s) => s.emitted);
    h.emitted.push(...facts);
    await h.drain(facts);
    return result;
  }
  /** The send commands emitted so far, in order (the drain holds them back). */
  const held = () => h.emitted.filter((e) => e.event_type === SEND);
  const facts = (type: string) => h.store.log.filter((e) => e.event_type === type);
  const setOrder = (order: OrderRecord) => table.set(order.order_id, order);
  const setOrdersDown = (down: boolean) => {
    ordersDown = down;
  };
  return { ...h, toSender, held, facts, setOrder, setOrdersDown };
}

type Harness = ReturnType<typeof harness>;

/** A customer's message whose send command is held back before the sender. */
async function pendingSend(h: Harness, text: string, customer = "cust_alice") {
  const message = clientMessage(newConversationId(), text, { customer });
  await h.drain([message]);
  const send = h.held().find((e) => e.task_id === message.task_id);
  if (!send) throw new Error(`no send command for ${message.task_id}`);
  return { message, send };
}

/** An operator's command about `message`'s turn, on `<aggregate>/<task_id>`. */
const commandOn = (type: string, message: Envelope, aggregate: string, extra = {}) =>
  operatorCommand(
    type,
    { type: aggregate, id: message.task_id },
    message.conversation_id as string,
    extra,
  );

const cancelRequested = (message: Envelope, reason = "customer called in") =>
  commandOn("support.cancel.requested", message, "delivery", { reason });

/** The DiscardedByReason counts the consumer publishes for `result`, by reason. */
function discardCounts(result: ConsumeResult): Record<string, number> {
  const counts: Record<string, number> = {};
  const metrics = {
    addMetric: () => {},
    singleMetric: () => {
      let reason = "";
      return {
        addDimension: (_name: string, value: string) => {
          reason = value;
        },
        addMetric: (name: string) => {
          if (name === "DiscardedByReason") counts[reason] = (counts[reason] ?? 0) + 1;
        },
      };
    },
  };
  const logger = { info: () => {} };
  recordConsumed(result, 1, { metrics, logger } as unknown as Observability);
  return counts;
}

const refunded: OrderRecord = {
  ...ORDER_123,
  status: "returned",
  refund: { status: "refunded", amount_cents: 4999, updated_at: "2026-09-01T10:00:20Z" },
};

describe("a reply invalidated by a change of the order it rests on", () => {
  it("is discarded invalidated_by_state_change when the refund went through after the lookup, never sent, and counted", async () => {
    const h = harness();
    const { message, send } = await pendingSend(h, "Has the refund for order 123 gone through?");
    expect((send.payload as SendRequested).rests_on).toEqual(restsOn(ORDER_123));
    h.setOrder(refunded);

    const result = await h.toSender(send);
    expect(result).toMatchObject({ status: "discarded", reason: "invalidated_by_state_change" });
    expect(discardCounts(result)).toEqual({ invalidated_by_state_change: 1 });
    const [row] = await h.store.inboxRecords("sender", [send.event_id]);
    expect(row).toMatchObject({ outcome: "discarded", reason: "invalidated_by_state_change" });
    expect(h.channel.sends()).toBe(0);
    expect(h.sideEffects.records.size).toBe(0);
    expect(h.facts(DELIVERED)).toHaveLength(0);
    const view = await h.state<ConversationView>(
      "conversation_view",
      message.conversation_id ?? "",
    );
    expect(view?.turns[message.task_id]?.status).toBe("generated");
  });

  it("is sent when the order still shows what the reply says", async () => {
    const h = harness();
    const { send } = await pendingSend(h, "Has the refund for order 123 gone through?");
    h.setOrder({ ...ORDER_123, item: "Wireless earbuds (black)" });
    expect((await h.toSender(send)).status).toBe("applied");
    expect(h.channel.deliveries().map((d) => d.key)).toEqual([replyKey(send)]);
  });

  it("a reply that rests on no order is sent whatever the orders do", async () => {
    const h = harness();
    const { send } = await pendingSend(h, "Do you ship to Norway?");
    expect((send.payload as SendRequested).rests_on).toBeUndefined();
    h.setOrder(refunded);
    expect((await h.toSender(send)).status).toBe("applied");
    expect(h.channel.deliveries()).toHaveLength(1);
  });

  it("an order gone or now another customer's no longer holds", () => {
    const facts = restsOn(ORDER_123);
    expect(stillHolds(facts, ORDER_123, "cust_alice")).toBe(true);
    expect(stillHolds(facts, undefined, "cust_alice")).toBe(false);
    expect(stillHolds(facts, { ...ORDER_123, customer_id: "cust_bob" }, "cust_alice")).toBe(false);
    expect(stillHolds(facts, { ...ORDER_123, status: "delivered" }, "cust_alice")).toBe(false);
    const { refund: _, ...noRefund } = ORDER_123;
    expect(stillHolds(facts, noRefund, "cust_alice")).toBe(false);
  });

  it("an orders read that fails is retried: nothing recorded, then the check runs", async () => {
    const h = harness();
    const { send } = await pendingSend(h, "Has the refund for order 123 gone through?");
    h.setOrder(refunded);
    h.setOrdersDown(true);
    await expect(h.toSender(send)).rejects.toMatchObject({ code: "dynamodb.throttled" });
    expect(h.channel.sends()).toBe(0);
    expect(h.sideEffects.records.size).toBe(0);
    expect(await h.store.inboxRecords("sender", [send.event_id])).toEqual([]);
    h.setOrdersDown(false);
    expect(await h.toSender(send, 2)).toMatchObject({ reason: "invalidated_by_state_change" });
  });

  it("a send claimed before the change is resolved, never dropped: unsent, it is closed", async () => {
    const h = harness();
    const { send } = await pendingSend(h, "Has the refund for order 123 gone through?");
    h.channel.inject({ kind: "unavailable" });
    await expect(h.toSender(send)).rejects.toBeInstanceOf(TransientError);
    expect(h.sideEffects.records.get(replyKey(send))?.state).toBe("pending");
    h.setOrder(refunded);

    const result = await h.toSender(send, 2);
    expect(result).toMatchObject({ status: "discarded", reason: "invalidated_by_state_change" });
    expect(h.channel.queries()).toBe(1);
    expect(h.channel.deliveries()).toHaveLength(0);
    expect(h.sideEffects.records.get(replyKey(send))).toMatchObject({
      state: "failed",
      error: { code: NOT_SENT },
    });
  });

  it("a send claimed before the change that the channel took stays delivered", async () => {
    const h = harness();
    const { send } = await pendingSend(h, "Has the refund for order 123 gone through?");
    h.channel.inject({ kind: "timeout-after-apply" });
    h.channel.inject({ kind: "query-unknown" });
    await expect(h.toSender(send)).rejects.toMatchObject({ code: "channel.outcome_unknown" });
    h.setOrder(refunded);

    const result = await h.toSender(send, 2);
    expect(result.status).toBe("applied");
    expect(h.channel.sends()).toBe(1);
    expect(h.facts(DELIVERED)).toHaveLength(1);
  });
});

describe("a cancelled support turn", () => {
  it("discards its send as cancelled, never sent; the cancel is recorded once and reported", async () => {
    const h = harness();
    const { message, send } = await pendingSend(h, "Where is order A-1001?");
    const cancel = cancelRequested(message);
    expect((await h.toSender(cancel)).status).toBe("applied");
    const [cancelled] = h.facts("support.cancelled") as Envelope<SupportCancelled>[];
    expect(cancelled?.payload).toMatchObject({
      requested_by: "ops_anna",
      reason: "customer called in",
      delivered_keys: [],
    });
    expect(cancelled?.order_key).toBe(message.conversation_id);

    const result = await h.toSender(send);
    expect(result).toMatchObject({ status: "discarded", reason: "cancelled" });
    expect(discardCounts(result)).toEqual({ cancelled: 1 });
    expect(h.channel.sends()).toBe(0);
    expect(h.sideEffects.records.size).toBe(0);

    expect((await h.toSender(cancelRequested(message, "again"))).status).toBe("applied");
    expect(h.facts("support.cancelled")).toHaveLength(1);
    expect((await h.state<DeliveryState>("delivery", message.task_id))?.cancelled).toMatchObject({
      requested_by: "ops_anna",
      reason: "customer called in",
    });
  });

  it("a reply already delivered stays delivered", async () => {
    const h = harness();
    const { message, send } = await pendingSend(h, "Where is order A-1001?");
    expect((await h.toSender(send)).status).toBe("applied");
    await h.toSender(cancelRequested(message));
    const [cancelled] = h.facts("support.cancelled") as Envelope<SupportCancelled>[];
    expect(cancelled?.payload.delivered_keys).toEqual([replyKey(send)]);
    const delivery = await h.state<DeliveryState>("delivery", message.task_id);
    expect(delivery?.keys[replyKey(send)]?.outcome).toBe("delivered");
    expect(h.channel.deliveries().map((d) => d.key)).toEqual([replyKey(send)]);
  });

  it("a held reply approved after the cancel is not sent", async () => {
    const h = harness();
    const message = clientMessage(
      newConversationId(),
      `Refund order 123 twice? ${HUMAN_REVIEW_MARKER}`,
    );
    await h.drain([message]);
    expect(h.held()).toEqual([]);
    await h.toSender(cancelRequested(message));
    await h.drain([commandOn("reply.approve.requested", message, "reply")]);
    expect(h.held()).toHaveLength(1);
    const approved = h.held()[0] as Envelope;
    expect((approved.payload as SendRequested).logical_attempt).toBe(2);
    expect(await h.toSender(approved)).toMatchObject({
      status: "discarded",
      reason: "cancelled",
    });
    expect(h.channel.sends()).toBe(0);
  });

  it("a send claimed before the cancel is resolved, and the cancel is kept", async () => {
    const h = harness();
    const { message, send } = await pendingSend(h, "Where is order A-1001?");
    h.channel.inject({ kind: "timeout-after-apply" });
    h.channel.inject({ kind: "query-unknown" });
    await expect(h.toSender(send)).rejects.toMatchObject({ code: "channel.outcome_unknown" });
    await h.toSender(cancelRequested(message));

    expect((await h.toSender(send, 2)).status).toBe("applied");
    expect(h.channel.sends()).toBe(1);
    const delivery = await h.state<DeliveryState>("delivery", message.task_id);
    expect(delivery?.keys[replyKey(send)]?.outcome).toBe("delivered");
    expect(delivery?.cancelled?.requested_by).toBe("ops_anna");
  });

  it("cancelled is the reason even when a newer message also superseded the reply", async () => {
    const h = harness();
    const { message, send } = await pendingSend(h, "Where is order A-1001?");
    const conversationId = message.conversation_id as string;
    await h.drain([clientMessage(conversationId, "Never mind, found it.")]);
    await h.toSender(cancelRequested(message));
    expect(await h.toSender(send)).toMatchObject({ status: "discarded", reason: "cancelled" });
  });
});
