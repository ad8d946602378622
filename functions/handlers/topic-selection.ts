import { agentEntry } from "./content-agents";

export const { create, handler } = agentEntry("topic-selection");
