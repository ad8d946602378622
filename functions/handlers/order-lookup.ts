import { createOrderLookupHandler, lazyHandler, type SupportOptions } from "./support";

/** Builds the handler with explicit configuration, clients or orders (local runtime, tests). */
export const create = (options?: SupportOptions) => createOrderLookupHandler(options);
export const handler = lazyHandler(() => createOrderLookupHandler());
