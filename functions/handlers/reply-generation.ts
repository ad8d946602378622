import { lambdaEntry } from "./lambda-entry";
import { createReplyGenerationHandler } from "./support";

export const { create, handler } = lambdaEntry(createReplyGenerationHandler);
