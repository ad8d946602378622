import * as z from "../../../../schemas/zod";
import {
  defineModule,
  handlerBeside,
  raiseOn,
  sideEffects,
  UNKNOWN_SIDE_EFFECTS,
} from "../../../kit";
import { conversationReader } from "../conversation/conversation";
import { SUPPORT_EVENT_TYPES } from "../events/index";
import { orders } from "../integrations/orders";
import { replyChannel } from "../integrations/reply-channel";
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
  entry: handlerBeside(import.meta.url),
  events: SUPPORT_EVENT_TYPES,
  deployment: {
    batchSize: 1,
    ...TENANT_FAIR_CONCURRENCY,
    delivery: "relay",
    // It escalates an outcome it cannot learn after MAX_UNKNOWN_ATTEMPTS (5); the queue must hand
    // the message out at least that often before dead-lettering it.
    maxReceiveCount: 8,
    attention: [
      raiseOn(
        "notification.failed",
        UNKNOWN_SIDE_EFFECTS,
        (failed) => failed.outcome === "unknown",
      ),
    ],
  },
  settings: SenderSettings,
  uses: { channel: replyChannel, sideEffects, orders },
  build: (ports, settings) =>
    senderRole({
      channel: ports.channel,
      sideEffects: ports.sideEffects,
      conversation: conversationReader(ports.store),
      orders: ports.orders,
      maxUnknownAttempts: settings.MAX_UNKNOWN_ATTEMPTS,
    }),
});
