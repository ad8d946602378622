import * as z from "../../../../schemas/zod";
import { raiseOn, UNKNOWN_SIDE_EFFECTS } from "../../../core/attention";
import { defineModule, requirePort } from "../../../core/role-module";
import { conversationReader } from "../conversation/conversation";
import { TENANT_FAIR_CONCURRENCY } from "../tenant-fairness";
import { DEFAULT_MAX_UNKNOWN_ATTEMPTS, SENDER, senderRole } from "./sender";

/** `MAX_UNKNOWN_ATTEMPTS` (default 5): attempts at an unknown outcome before it escalates. */
export const SenderSettings = z.object({
  MAX_UNKNOWN_ATTEMPTS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(100)),
    DEFAULT_MAX_UNKNOWN_ATTEMPTS,
  ),
});

/**
 * The sender: sends a turn's reply through the reply channel exactly once (idempotency records in
 * the side-effects table), after reading the order it rests on again.
 */
export const senderModule = defineModule({
  descriptor: SENDER,
  entry: "functions/roles/customer-support/sender/handler.ts",
  deployment: {
    batchSize: 1,
    ...TENANT_FAIR_CONCURRENCY,
    // It escalates an outcome it cannot learn after MAX_UNKNOWN_ATTEMPTS (5); the queue must hand
    // the message out at least that often before dead-lettering it.
    maxReceiveCount: 8,
    needs: { replyChannel: true, orders: true },
    attention: [
      raiseOn(
        "notification.failed",
        UNKNOWN_SIDE_EFFECTS,
        (failed) => failed.outcome === "unknown",
      ),
    ],
  },
  settings: SenderSettings,
  build: (ports, settings) =>
    senderRole({
      channel: requirePort(ports, "channel", "sender"),
      sideEffects: requirePort(ports, "sideEffects", "sender"),
      conversation: conversationReader(ports.store),
      orders: requirePort(ports, "orders", "sender"),
      maxUnknownAttempts: settings.MAX_UNKNOWN_ATTEMPTS,
    }),
});
