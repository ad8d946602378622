/**
 * AgentBus's local runtime (`agentbus/local`): an application's stack synthesized and deployed on
 * the local AWS emulator, its functions run in this process against it, with the local model and
 * the stand-ins the application gives: `startLocal({ stack: { roles, integrations } })`. What
 * `npm start` and the end-to-end tests of this repository run, with the reference stack. Events
 * go in as a client puts them (`putOnBus`); `crashAfter` kills the invocation that makes a given
 * call, just after it, to test what a redelivery does.
 */

export type { CallMatch } from "./dev/local/crash-after";
export { crashAfter } from "./dev/local/crash-after";
export { putOnBus } from "./dev/local/put-on-bus";
export type { FaultInjection } from "./dev/local/runtime/faults";
export type { LocalEnvironment, LocalOptions } from "./dev/local/start";
export { startLocal } from "./dev/local/start";
export type { LocalStack } from "./dev/local/synth";
