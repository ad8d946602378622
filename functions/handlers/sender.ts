import { createSenderHandler, lazyHandler, type SupportOptions } from "./support";

/** Builds the handler with explicit configuration, clients or channel (local runtime, tests). */
export const create = (options?: SupportOptions) => createSenderHandler(options);
export const handler = lazyHandler(() => createSenderHandler());
