import * as z from "../../../schemas/zod";
import { LocalChannel } from "../../adapters/channel/local-channel";
import { SnsChannel } from "../../adapters/channel/sns-channel";
import { DynamoSideEffects } from "../../adapters/dynamodb/side-effects";
import { parseEnv } from "../../core/parse-env";
import type { RolePorts } from "../../core/role-module";
import { containerAwsClient } from "../aws";
import type { PortWiring } from "../role-ports";

const TableName = z.string().check(z.minLength(1));

/**
 * `needs.replyChannel`: `CHANNEL_PROVIDER` = `sns` (default: `CHANNEL_TOPIC_ARN`, an SNS FIFO
 * topic) or `local` (the LocalChannel stand-in, which only records deliveries in memory), and
 * `SIDE_EFFECTS_TABLE` for the idempotency records.
 */
const ChannelEnv = z.discriminatedUnion("CHANNEL_PROVIDER", [
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

export function replyChannelPorts(wiring: PortWiring): Pick<RolePorts, "channel" | "sideEffects"> {
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
