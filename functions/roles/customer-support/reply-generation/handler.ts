import { moduleEntry } from "../../../handlers/module-entry";
import { modelPort } from "../../../handlers/ports/model";
import { replyGenerationModule } from "./module";

export const { create, handler } = moduleEntry(replyGenerationModule, { model: modelPort });
