import { createConversationHandler, lazyHandler, type SupportOptions } from "./support";

/** Builds the handler with explicit configuration and clients (local runtime, tests). */
export const create = (options?: SupportOptions) => createConversationHandler(options);
export const handler = lazyHandler(() => createConversationHandler());
