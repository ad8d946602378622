import * as z from "../../../../schemas/zod";
import { defineModule, handlerBeside } from "../../../kit";
import { SUPPORT_EVENT_TYPES } from "../events/index";
import { TENANT_FAIR_CONCURRENCY } from "../tenant-fairness";
import { DEFAULT_HOLD_SECONDS } from "./client-order";
import { conversation, conversationRole } from "./conversation";

/**
 * `REPLY_TTL_SECONDS` (default 300): how long a reply stays worth sending;
 * `CLIENT_SEQ_HOLD_SECONDS` (default 60): how long a message waits for those its client sent
 * before it (./client-order.ts).
 */
export const ConversationSettings = z.object({
  REPLY_TTL_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(86_400)),
    300,
  ),
  CLIENT_SEQ_HOLD_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(86_400)),
    DEFAULT_HOLD_SECONDS,
  ),
});

/**
 * The conversation (seed 000 §10): the customer's messages, in order, and each turn's commands.
 * Every command and fact of a conversation carries `order_key = conversation_id`, so each group of
 * the customer-support family handles one conversation's work in order.
 */
export const conversationModule = defineModule({
  descriptor: conversation,
  entry: handlerBeside(import.meta.url),
  events: SUPPORT_EVENT_TYPES,
  deployment: { ...TENANT_FAIR_CONCURRENCY, delivery: "relay" },
  settings: ConversationSettings,
  build: (_ports, settings) =>
    conversationRole({
      replyTtlSeconds: settings.REPLY_TTL_SECONDS,
      holdSeconds: settings.CLIENT_SEQ_HOLD_SECONDS,
    }),
});
