import { moduleEntry } from "../../../handlers/module-entry";
import { ordersPort } from "../../../handlers/ports/orders";
import { replyChannelPorts } from "../../../handlers/ports/reply-channel";
import { senderModule } from "./module";

export const { create, handler } = moduleEntry(senderModule, {
  orders: ordersPort,
  replyChannel: replyChannelPorts,
});
