import { defineIntegration } from "../../core/integration";
import { InMemoryA2aAgent } from "./memory";
import type { A2aAgentPort } from "./port";

export type { A2aFile, A2aFileRef } from "./files";
export { MAX_A2A_FILE_BYTES, readA2aFile } from "./files";
export type { A2aAnswer, A2aFault } from "./memory";
export { InMemoryA2aAgent } from "./memory";
export type { A2aCallDeclaration, A2aOutput } from "./message";
export { a2aCardHash } from "./message";
export type { A2aAgentPort, A2aCard, A2aOutgoing, A2aTaskState, A2aTaskView } from "./port";
export type { A2aStepDeclaration, A2aStepHandler } from "./step";
export { a2aStep } from "./step";
export type { A2aToolDeclaration, A2aToolInput } from "./tool";
export { a2aTool } from "./tool";

/**
 * Where another system's A2A agent is and how to authenticate to it: a role's use of the
 * integration (`use(a2a, { url, credentials })`). The bearer token is read from Systems Manager
 * (a SecureString parameter) or from Secrets Manager, never from code.
 */
export interface A2aAgentOptions {
  /** The agent card's URL (`https://partner.example.com/.well-known/agent-card.json`). */
  readonly url: string;
  /**
   * Where its bearer token is: a Secrets Manager secret (its name or ARN) or an SSM parameter
   * (its name, `/partner/a2a-token`). None: the agent takes no token.
   */
  readonly credentials?: { readonly secret: string } | { readonly parameter: string };
}

/**
 * Another system's agent over A2A (./README.md): its card read once per container, messages sent
 * through the official SDK's client (./aws.ts, ./sdk-agent.ts); an agent uses it as a tool with
 * `a2aTool`, a workflow as a node with `a2aStep`, each write through the side-effect ledger. Its
 * twin is an agent in memory that answers `completed` until a test says otherwise (./memory.ts).
 */
export const a2a = /* @__PURE__ */ defineIntegration<A2aAgentPort, A2aAgentOptions | undefined>({
  name: "a2a",
  access: "write",
  does: "sends messages to another system's A2A agent",
  // No agent without `use(a2a, { url, ... })`: the adapter and the infrastructure refuse it.
  defaults: undefined,
  memory: () => new InMemoryA2aAgent(),
  notes:
    "The agent card's URL and the name of its token's secret or parameter are the role's use of it; the card and token are read once per container (the token again after a 401). A write whose outcome stays unknown waits for a person.",
});
