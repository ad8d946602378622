import { familyEntry, modelAdapter } from "../../lambda";
import { contentAgentModules } from "./index";

/** One entry for the four content agents: the function's `GROUP_NAME` picks the agent. */
export const { create, handler } = familyEntry(contentAgentModules, [modelAdapter]);
