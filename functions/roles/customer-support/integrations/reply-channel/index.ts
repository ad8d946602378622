import { defineIntegration } from "../../../../kit";
import { LocalChannel } from "./memory";
import type { ChannelPort } from "./port";

export type { ChannelPort };

/**
 * The channel the sender delivers replies through (./port.ts). On AWS an SNS FIFO topic the
 * stack provisions (./infra.ts): the sender publishes with the side-effect key as deduplication
 * id, so SNS drops a resend of the same key within five minutes; subscribe the customer-facing
 * delivery (a chat backend's queue or endpoint) to it. Its twin, LocalChannel, only records what
 * it is sent.
 */
export const replyChannel = /* @__PURE__ */ defineIntegration<ChannelPort>({
  name: "replyChannel",
  access: "write",
  does: "sends through the reply channel",
  defaults: undefined,
  memory: () => new LocalChannel(),
  notes:
    "A send whose outcome could not be learnt waits for `agentbus send resolve`; the topic is output RepliesTopicArn.",
});
