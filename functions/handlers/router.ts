import { lambdaEntry } from "./lambda-entry";
import { createRouterHandler } from "./support";

export const { create, handler } = lambdaEntry(createRouterHandler);
