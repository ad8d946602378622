import { modelAdapter, moduleEntry } from "../../../lambda";
import { replyGenerationModule } from "./module";

export const { create, handler } = moduleEntry(replyGenerationModule, [modelAdapter]);
