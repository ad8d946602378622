import { lambdaEntry } from "./lambda-entry";
import { createOrderLookupHandler } from "./support";

export const { create, handler } = lambdaEntry(createOrderLookupHandler);
