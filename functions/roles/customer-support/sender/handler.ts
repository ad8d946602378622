import { moduleEntry, sideEffectsAdapter } from "../../../lambda";
import { ordersAdapter } from "../integrations/orders/aws";
import { replyChannelAdapter } from "../integrations/reply-channel/aws";
import { senderModule } from "./index";

export const { create, handler } = moduleEntry(senderModule, [
  replyChannelAdapter,
  sideEffectsAdapter,
  ordersAdapter,
]);
