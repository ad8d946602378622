import { familyEntry } from "../../handlers/module-entry";
import { modelAdapter } from "../../integrations/model/aws";
import { contentAgentModules } from "./module";

/** One entry for the four content agents: the function's `GROUP_NAME` picks the agent. */
export const { create, handler } = familyEntry(contentAgentModules, [modelAdapter]);
