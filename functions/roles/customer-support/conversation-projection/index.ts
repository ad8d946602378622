import { defineModule, handlerBeside } from "../../../kit";
import { conversationProjection } from "./conversation-projection";

/** The conversation read model: each conversation's turns and their status, for people. */
export const conversationProjectionModule = defineModule({
  descriptor: conversationProjection,
  entry: handlerBeside(import.meta.url),
  deployment: {},
  build: () => conversationProjection,
});
