import { lambdaEntry } from "./lambda-entry";
import { createSenderHandler } from "./support";

export const { create, handler } = lambdaEntry(createSenderHandler);
