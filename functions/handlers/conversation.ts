import { lambdaEntry } from "./lambda-entry";
import { createConversationHandler } from "./support";

export const { create, handler } = lambdaEntry(createConversationHandler);
