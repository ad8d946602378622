import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { BedrockModel } from "../adapters/bedrock/model";
import { LocalChannel } from "../adapters/channel/local-channel";
import { SnsChannel } from "../adapters/channel/sns-channel";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoOrders } from "../adapters/dynamodb/orders";
import { DynamoSideEffects } from "../adapters/dynamodb/side-effects";
import { DeterministicLocalModel } from "../adapters/local-model";
import { sqsQueueDepth } from "../adapters/sqs/queue-depth";
import { describe } from "../core/errors";
import type { ModelPort } from "../core/model";
import type { GroupNeeds, OrdersPort, RolePorts } from "../core/role-module";
import type { ChannelPort } from "../core/side-effects";
import { containerAwsClient } from "./aws";
import { ConsumerEnv, parseEnv } from "./env";
import type { Observability } from "./observe";

/**
 * A role's ports on AWS, built from the function's environment for what its module declares it
 * needs (functions/core/role-module.ts GroupNeeds):
 *
 * - always `store`: the consumer's tables (`STATE_TABLE`, `EVENTS_TABLE`, `INBOX_TABLE`), read;
 * - `model`: `MODEL_PROVIDER=bedrock` (the default; what deployed stacks set): Bedrock Converse
 *   with `MODEL_ID` (required); `MODEL_PROVIDER=local`: the DeterministicLocalModel, a scripted
 *   stand-in that is NOT a model (no AWS, no network, same answers for the same request);
 * - `orders`: `ORDERS_TABLE` (GetItem only);
 * - `replyChannel`: `CHANNEL_PROVIDER` = `sns` (default: `CHANNEL_TOPIC_ARN`, an SNS FIFO topic)
 *   or `local` (the LocalChannel stand-in, which only records deliveries in memory), and
 *   `SIDE_EFFECTS_TABLE` for the idempotency records;
 * - `orchestrates`: `AGENT_QUEUE_URLS` (JSON, agent group -> queue URL) turns on the queue-depth
 *   source (SQS GetQueueAttributes, cached a few seconds); without it there is none.
 *
 * Tests and the local runtime may inject `model`, `channel` or `orders`, which win.
 */

export interface PortOverrides {
  readonly model?: ModelPort;
  readonly channel?: ChannelPort;
  readonly orders?: OrdersPort;
  /** Client for the reply channel's SNS topic (default: the container's). */
  readonly sns?: AwsClient;
  /** Client for `MODEL_PROVIDER=bedrock` (default: the container's). */
  readonly bedrock?: AwsClient;
}

type Env = Readonly<Record<string, string | undefined>>;

export const ModelEnv = z.discriminatedUnion("MODEL_PROVIDER", [
  z.object({
    MODEL_PROVIDER: z.literal("bedrock"),
    MODEL_ID: z.string().check(z.trim(), z.minLength(1)),
  }),
  z.object({ MODEL_PROVIDER: z.literal("local"), MODEL_ID: z.optional(z.string()) }),
]);

const TableName = z.string().check(z.minLength(1));

export const ChannelEnv = z.discriminatedUnion("CHANNEL_PROVIDER", [
  z.object({
    CHANNEL_PROVIDER: z.literal("sns"),
    CHANNEL_TOPIC_ARN: z.string().check(
      z.regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:.+\.fifo$/, {
        message: "must be the ARN of an SNS FIFO topic",
      }),
    ),
    SIDE_EFFECTS_TABLE: TableName,
  }),
  z.object({ CHANNEL_PROVIDER: z.literal("local"), SIDE_EFFECTS_TABLE: TableName }),
]);

/** Agent group -> queue URL, as a JSON object (the orchestrator's queue-depth gate). */
const QueueUrls = z.pipe(
  z.pipe(
    z.string(),
    z.transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.issues.push({
          code: "custom",
          message: "must be a JSON object of group -> queue URL",
          input: text,
        });
        return z.NEVER;
      }
    }),
  ),
  z.record(z.string().check(z.minLength(1)), z.url()),
);
const QueueDepthEnv = z.object({ AGENT_QUEUE_URLS: z.optional(QueueUrls) });

export interface PortWiring {
  readonly group: string;
  readonly needs: GroupNeeds;
  readonly env: Env;
  readonly dynamodb: AwsClient;
  readonly sqs?: AwsClient;
  readonly observability: Observability;
  readonly overrides: PortOverrides;
}

/** The ports of a role whose module needs `wiring.needs`, each from its part of the environment. */
export function awsRolePorts(wiring: PortWiring): RolePorts {
  const { needs, overrides } = wiring;
  return {
    store: consumerStore(wiring),
    model: needs.model ? (overrides.model ?? modelFromEnv(wiring)) : undefined,
    orders: needs.orders ? (overrides.orders ?? ordersFromEnv(wiring)) : undefined,
    ...(needs.replyChannel ? channelFromEnv(wiring) : {}),
    queueDepth: needs.orchestrates ? queueDepthFromEnv(wiring) : undefined,
  };
}

function consumerStore({ env, group, dynamodb }: PortWiring): DynamoConsumerStore {
  const tables = parseEnv(ConsumerEnv, env, group);
  return new DynamoConsumerStore({
    client: dynamodb,
    tables: { state: tables.STATE_TABLE, events: tables.EVENTS_TABLE, inbox: tables.INBOX_TABLE },
  });
}

function modelFromEnv({ env, group, overrides }: PortWiring): ModelPort {
  const parsed = parseEnv(
    ModelEnv,
    { ...env, MODEL_PROVIDER: env.MODEL_PROVIDER ?? "bedrock" },
    group,
  );
  if (parsed.MODEL_PROVIDER === "local") return new DeterministicLocalModel();
  const client = overrides.bedrock ?? containerAwsClient();
  return new BedrockModel({ client, modelId: parsed.MODEL_ID });
}

function ordersFromEnv({ env, group, dynamodb }: PortWiring): OrdersPort {
  const { ORDERS_TABLE } = parseEnv(z.object({ ORDERS_TABLE: TableName }), env, group);
  return new DynamoOrders(dynamodb, ORDERS_TABLE);
}

function channelFromEnv(wiring: PortWiring): Pick<RolePorts, "channel" | "sideEffects"> {
  const { env, group, dynamodb, overrides } = wiring;
  const parsed = parseEnv(
    ChannelEnv,
    { ...env, CHANNEL_PROVIDER: env.CHANNEL_PROVIDER ?? "sns" },
    group,
  );
  const channel =
    overrides.channel ??
    (parsed.CHANNEL_PROVIDER === "local"
      ? new LocalChannel()
      : new SnsChannel({
          client: overrides.sns ?? containerAwsClient(),
          topicArn: parsed.CHANNEL_TOPIC_ARN,
        }));
  const sideEffects = new DynamoSideEffects({
    client: dynamodb,
    tableName: parsed.SIDE_EFFECTS_TABLE,
  });
  return { channel, sideEffects };
}

function queueDepthFromEnv(wiring: PortWiring): RolePorts["queueDepth"] {
  const { AGENT_QUEUE_URLS } = parseEnv(QueueDepthEnv, wiring.env, wiring.group);
  if (!AGENT_QUEUE_URLS) return undefined;
  return sqsQueueDepth({
    client: wiring.sqs ?? containerAwsClient(),
    queueUrls: AGENT_QUEUE_URLS,
    onError: (group, error) =>
      wiring.observability.logger.warn("could not read a queue depth; counting it as 0", {
        group,
        error: describe(error),
      }),
  });
}
