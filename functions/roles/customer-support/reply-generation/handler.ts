import { moduleEntry } from "../../../handlers/module-entry";
import { modelAdapter } from "../../../integrations/model/aws";
import { replyGenerationModule } from "./module";

export const { create, handler } = moduleEntry(replyGenerationModule, [modelAdapter]);
