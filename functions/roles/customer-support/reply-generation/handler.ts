import { modelAdapter, moduleEntry } from "../../../lambda";
import { replyGenerationModule } from "./index";

export const { create, handler } = moduleEntry(replyGenerationModule, [modelAdapter]);
