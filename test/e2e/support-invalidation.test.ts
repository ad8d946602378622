import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type {
  OrderRecord,
  SendRequested,
} from "../../functions/roles/customer-support/events/conversation";
import { putOrders } from "../../functions/roles/customer-support/integrations/orders/dynamodb";
import { SAMPLE_ORDERS } from "../../functions/roles/customer-support/integrations/orders/sample-orders";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import {
  customerMessage,
  loadConversation,
  sideEffectOf,
  streamOf,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import { renderSummary } from "../../lib/dev/local/trace";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { Envelope } from "../../schemas";
import { localCli } from "../support/cli";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * Replies that no longer hold, on the local stack (seed 000 §11.5): a reply whose order changed in
 * the orders table after the lookup is discarded by the sender as `invalidated_by_state_change`,
 * and a turn cancelled with `agentbus reply cancel` (run as a child process) has its send
 * discarded as `cancelled`. Neither reaches the channel; both are recorded with their reason and
 * counted per group.
 */
describe("replies discarded because they no longer hold, on the local stack", () => {
  const local = localSupportStack("si");
  const { deliveriesTo, putMessages, sendOf } = local;
  const cli = localCli(() => local.env, local.stage, { AGENTBUS_OPERATOR: "ops_anna" });
  const senderRow = (eventId: string) =>
    waitUntil(
      `the sender's record of ${eventId}`,
      () => local.inboxRow("sender", eventId),
      TIMEOUT,
    );
  const senderSummary = () => renderSummary(["sender"], local.env.observations);

  it(
    "the refund went through after the lookup: the reply is discarded invalidated_by_state_change",
    async () => {
      const conversationId = `conv_${ulid()}`;
      const message = customerMessage(
        conversationId,
        "cust_alice",
        "Has the refund for order 123 gone through?",
      );
      const order = SAMPLE_ORDERS.find((o) => o.order_id === "123") as OrderRecord;
      local.env.runtime.pauseGroup("sender");
      let send: Envelope;
      try {
        await putMessages(message);
        send = await sendOf(message);
        expect((send.payload as SendRequested).rests_on).toMatchObject({
          order_id: "123",
          refund_status: "submitted",
        });
        const refunded: OrderRecord = {
          ...order,
          refund: { status: "refunded", amount_cents: 4999, updated_at: new Date().toISOString() },
        };
        await putOrders(
          fromSdk(local.env.clients.dynamodb),
          local.env.names.tables.orders as string,
          [refunded],
        );
      } finally {
        local.env.runtime.resumeGroup("sender");
      }
      expect(await senderRow(send.event_id)).toMatchObject({
        outcome: "discarded",
        reason: "invalidated_by_state_change",
      });
      await local.env.runtime.idle();
      expect(deliveriesTo(conversationId)).toEqual([]);
      expect(await sideEffectOf(local.env, `${message.task_id}:reply:1`)).toBeUndefined();
      expect(senderSummary()).toContain("1 invalidated_by_state_change");
      const view = await loadConversation(local.env, conversationId);
      expect(view?.turns[message.task_id]?.status).not.toBe("delivered");
    },
    TIMEOUT * 2,
  );

  it(
    "a turn cancelled before its reply is generated: the send is discarded cancelled, nothing sent",
    async () => {
      const conversationId = `conv_${ulid()}`;
      const message = customerMessage(conversationId, "cust_bob", "Where is order 456?");
      local.env.runtime.pauseGroup("reply-generation");
      try {
        await putMessages(message);
        await waitUntil(
          "the order lookup",
          async () =>
            (await streamOf(local.env, { type: "order_lookup", id: message.task_id })).length > 0,
          TIMEOUT,
        );
        const cancelled = await cli("reply", "cancel", message.task_id, "--reason", "duplicate");
        expect(cancelled.code, cancelled.stderr).toBe(0);
        expect(cancelled.stdout).toContain("support.cancel.requested sent");
        const delivery = await waitUntil(
          "the recorded cancel",
          async () =>
            (await local.env.store.load({ state: { type: "delivery", id: message.task_id } })).state
              ?.data as DeliveryState | undefined,
          TIMEOUT,
        );
        expect(delivery.cancelled).toMatchObject({ requested_by: "ops_anna", reason: "duplicate" });
      } finally {
        local.env.runtime.resumeGroup("reply-generation");
      }
      const send = await sendOf(message);
      expect(await senderRow(send.event_id)).toMatchObject({
        outcome: "discarded",
        reason: "cancelled",
      });
      await local.env.runtime.idle();
      expect(deliveriesTo(conversationId)).toEqual([]);
      expect(await sideEffectOf(local.env, `${message.task_id}:reply:1`)).toBeUndefined();
      const facts = await streamOf(local.env, { type: "delivery", id: message.task_id });
      expect(facts.map((e) => e.event_type)).toEqual(["support.cancelled"]);
      expect(senderSummary()).toContain("1 cancelled");

      const again = await cli("reply", "cancel", message.task_id);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain("already cancelled");
    },
    TIMEOUT * 3,
  );

  it(
    "a reply already delivered stays delivered: the cancel is refused, nothing sent",
    async () => {
      const conversationId = `conv_${ulid()}`;
      const message = customerMessage(conversationId, "cust_carol", "Where is order C-3003?");
      await putMessages(message);
      await local.delivered(conversationId, message.task_id);
      const refused = await cli("reply", "cancel", message.task_id);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain("already delivered");
      expect((await cli("reply", "cancel", `task_${ulid()}`)).code).toBe(2);
      await local.env.runtime.idle();
      expect(deliveriesTo(conversationId)).toHaveLength(1);
    },
    TIMEOUT * 2,
  );
});
