import { conversationProjection } from "../roles/conversation-projection";
import { plainHandler } from "./support";

/** Builds the handler with explicit configuration and clients (local runtime, tests). */
export const { create, handler } = plainHandler(conversationProjection);
