import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { LocalChannel } from "../adapters/channel/local-channel";
import { SnsChannel } from "../adapters/channel/sns-channel";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoOrders } from "../adapters/dynamodb/orders";
import { DynamoSideEffects } from "../adapters/dynamodb/side-effects";
import type { ModelPort } from "../core/model";
import type { ChannelPort } from "../core/side-effects";
import {
  conversationContextReader,
  conversationReader,
  conversationVersionReader,
  createConversation,
} from "../roles/customer-support/conversation/conversation";
import {
  createOrderLookup,
  type OrdersPort,
} from "../roles/customer-support/order-lookup/order-lookup";
import { createReplyGeneration } from "../roles/customer-support/reply-generation/reply-generation";
import { createRouter } from "../roles/customer-support/router/router";
import { createSender } from "../roles/customer-support/sender/sender";
import { containerAwsClient } from "./aws";
import { type ConsumerOptions, createConsumerHandler, type SqsBatchHandler } from "./consumer";
import { modelFromEnv } from "./content-agents";
import { ConsumerEnv, parseEnv } from "./env";

/**
 * The Lambda side of the customer-support conversation (seed 000 §10): the shared consumer with
 * each role's decision and the ports it needs, built from the function's environment:
 *
 * - conversation: `REPLY_TTL_SECONDS` (default 300), how long a reply stays worth sending.
 * - router: the state table, for the turn's context (the conversation's recent messages).
 * - order-lookup: `ORDERS_TABLE`, the orders table (GetItem only).
 * - reply-generation: `MODEL_PROVIDER` / `MODEL_ID` (see ./content-agents), and the state table
 *   for the conversation's current version and the turn's context.
 * - sender: `CHANNEL_PROVIDER` = `sns` (default: `CHANNEL_TOPIC_ARN`, an SNS FIFO topic) or
 *   `local` (the LocalChannel stand-in, which only records deliveries in memory),
 *   `SIDE_EFFECTS_TABLE` for the idempotency records, `MAX_UNKNOWN_ATTEMPTS` (default 5),
 *   `ORDERS_TABLE` where the order a reply rests on is read again before it is sent.
 *
 * Tests and the local runtime may inject `model`, `channel` or `orders`, which win over the
 * environment.
 */

export interface SupportOptions extends ConsumerOptions {
  readonly model?: ModelPort;
  readonly channel?: ChannelPort;
  readonly orders?: OrdersPort;
  readonly sns?: AwsClient;
}

export const ConversationEnv = z.object({
  REPLY_TTL_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(86_400)),
    300,
  ),
});

export const OrderLookupEnv = z.object({ ORDERS_TABLE: z.string().check(z.minLength(1)) });

const SenderTables = {
  SIDE_EFFECTS_TABLE: z.string().check(z.minLength(1)),
  MAX_UNKNOWN_ATTEMPTS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(100)),
    5,
  ),
  ...OrderLookupEnv.shape,
};

export const SenderEnv = z.discriminatedUnion("CHANNEL_PROVIDER", [
  z.object({
    CHANNEL_PROVIDER: z.literal("sns"),
    CHANNEL_TOPIC_ARN: z.string().check(
      z.regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:.+\.fifo$/, {
        message: "must be the ARN of an SNS FIFO topic",
      }),
    ),
    ...SenderTables,
  }),
  z.object({
    CHANNEL_PROVIDER: z.literal("local"),
    ...SenderTables,
  }),
]);

type Env = Record<string, string | undefined>;

const envOf = (options: SupportOptions): Env => options.env ?? process.env;

/** The client shared by the consumer and the role's own reads. */
function withClient(options: SupportOptions): SupportOptions & { dynamodb: AwsClient } {
  return { ...options, dynamodb: options.dynamodb ?? containerAwsClient() };
}

/**
 * The store of the state table the consumer writes, where a role reads the conversation's state:
 * one per handler, which lambdaEntry builds once per container.
 */
function conversationStore(options: SupportOptions & { dynamodb: AwsClient }, what: string) {
  const env = parseEnv(ConsumerEnv, envOf(options), what);
  return new DynamoConsumerStore({
    client: options.dynamodb,
    tables: { state: env.STATE_TABLE, events: env.EVENTS_TABLE, inbox: env.INBOX_TABLE },
  });
}

export function createRouterHandler(options: SupportOptions = {}): SqsBatchHandler {
  const base = withClient(options);
  const context = conversationContextReader(conversationStore(base, "router"));
  return createConsumerHandler(createRouter({ context }), base);
}

export function createConversationHandler(options: SupportOptions = {}): SqsBatchHandler {
  const env = parseEnv(ConversationEnv, envOf(options), "conversation");
  return createConsumerHandler(
    createConversation({ replyTtlSeconds: env.REPLY_TTL_SECONDS }),
    options,
  );
}

export function createOrderLookupHandler(options: SupportOptions = {}): SqsBatchHandler {
  const base = withClient(options);
  const orders =
    options.orders ??
    new DynamoOrders(
      base.dynamodb,
      parseEnv(OrderLookupEnv, envOf(options), "order-lookup").ORDERS_TABLE,
    );
  return createConsumerHandler(createOrderLookup({ orders }), base);
}

export function createReplyGenerationHandler(options: SupportOptions = {}): SqsBatchHandler {
  const base = withClient(options);
  const model = options.model ?? modelFromEnv(envOf(options), "reply-generation");
  return createConsumerHandler(
    createReplyGeneration({
      model,
      conversation: conversationReader(conversationStore(base, "reply-generation")),
    }),
    base,
  );
}

export function createSenderHandler(options: SupportOptions = {}): SqsBatchHandler {
  const base = withClient(options);
  const raw = envOf(options);
  const env = parseEnv(
    SenderEnv,
    { ...raw, CHANNEL_PROVIDER: raw.CHANNEL_PROVIDER ?? "sns" },
    "sender",
  );
  const channel =
    options.channel ??
    (env.CHANNEL_PROVIDER === "local"
      ? new LocalChannel()
      : new SnsChannel({
          client: options.sns ?? containerAwsClient(),
          topicArn: env.CHANNEL_TOPIC_ARN,
        }));
  return createConsumerHandler(
    createSender({
      channel,
      sideEffects: new DynamoSideEffects({
        client: base.dynamodb,
        tableName: env.SIDE_EFFECTS_TABLE,
      }),
      conversationVersion: conversationVersionReader(conversationStore(base, "sender")),
      orders: options.orders ?? new DynamoOrders(base.dynamodb, env.ORDERS_TABLE),
      maxUnknownAttempts: env.MAX_UNKNOWN_ATTEMPTS,
    }),
    base,
  );
}
