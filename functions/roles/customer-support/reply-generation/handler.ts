import { moduleEntry } from "../../../handlers/module-entry";
import { replyGenerationModule } from "./module";

export const { create, handler } = moduleEntry(replyGenerationModule);
