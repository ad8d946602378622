import { type AgentOptions, createAgentHandler, lambdaAgent } from "./content-agents";

/** Builds the handler with explicit configuration, clients or model (local runtime, tests). */
export const create = (options?: AgentOptions) => createAgentHandler("review", options);
export const handler = lambdaAgent("review");
