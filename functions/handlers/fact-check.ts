import { agentEntry } from "./content-agents";

export const { create, handler } = agentEntry("fact-check");
