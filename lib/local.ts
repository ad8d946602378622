/**
 * AgentBus's local runtime (`agentbus/local`): the stack synthesized and deployed on the local
 * AWS emulator, its functions run in this process against it, with the local model and channel
 * stand-ins; what `npm start` and the end-to-end tests run.
 */

export type { LocalEnvironment, LocalOptions } from "./dev/local/environment";
export { startLocal } from "./dev/local/environment";
