import * as z from "../../../../../schemas/zod";
import { parseEnv } from "../../../../kit";
import { defineAdapter } from "../../../../lambda";
import { replyChannel } from "./index";
import { LocalChannel } from "./memory";
import { SnsChannel } from "./sns";

/**
 * `CHANNEL_PROVIDER` = `sns` (default: `CHANNEL_TOPIC_ARN`, an SNS FIFO topic) or `local` (the
 * LocalChannel stand-in, which only records deliveries in memory).
 */
const ChannelEnv = z.discriminatedUnion("CHANNEL_PROVIDER", [
  z.object({
    CHANNEL_PROVIDER: z.literal("sns"),
    CHANNEL_TOPIC_ARN: z.string().check(
      z.regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:.+\.fifo$/, {
        message: "must be the ARN of an SNS FIFO topic",
      }),
    ),
  }),
  z.object({ CHANNEL_PROVIDER: z.literal("local") }),
]);

export const replyChannelAdapter = /* @__PURE__ */ defineAdapter(
  replyChannel,
  ({ env, group, client }) => {
    const parsed = parseEnv(
      ChannelEnv,
      { ...env, CHANNEL_PROVIDER: env.CHANNEL_PROVIDER ?? "sns" },
      group,
    );
    if (parsed.CHANNEL_PROVIDER === "local") return new LocalChannel();
    return new SnsChannel({ client: client("sns"), topicArn: parsed.CHANNEL_TOPIC_ARN });
  },
);
