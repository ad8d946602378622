import { conversationProjection } from "../roles/customer-support/conversation-projection/conversation-projection";
import { consumerEntry } from "./consumer";

export const { create, handler } = consumerEntry(conversationProjection);
