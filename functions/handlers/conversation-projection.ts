import { conversationProjection } from "../roles/conversation-projection";
import { consumerEntry } from "./consumer";

export const { create, handler } = consumerEntry(conversationProjection);
