import { moduleEntry } from "../../../handlers/module-entry";
import { sideEffectsAdapter } from "../../../integrations/side-effects/aws";
import { ordersAdapter } from "../integrations/orders/aws";
import { replyChannelAdapter } from "../integrations/reply-channel/aws";
import { senderModule } from "./module";

export const { create, handler } = moduleEntry(senderModule, [
  replyChannelAdapter,
  sideEffectsAdapter,
  ordersAdapter,
]);
