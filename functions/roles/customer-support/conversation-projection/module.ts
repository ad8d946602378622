import { defineModule } from "../../../kit";
import { conversationProjection } from "./conversation-projection";

/** The conversation read model: each conversation's turns and their status, for people. */
export const conversationProjectionModule = defineModule({
  descriptor: conversationProjection,
  entry: "functions/roles/customer-support/conversation-projection/handler.ts",
  deployment: {},
  build: () => conversationProjection,
});
