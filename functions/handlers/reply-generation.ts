import { createReplyGenerationHandler, lazyHandler, type SupportOptions } from "./support";

/** Builds the handler with explicit configuration, clients or model (local runtime, tests). */
export const create = (options?: SupportOptions) => createReplyGenerationHandler(options);
export const handler = lazyHandler(() => createReplyGenerationHandler());
