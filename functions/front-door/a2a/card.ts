import { A2A_PROTOCOL_VERSION, type AgentCard } from "@a2a-js/sdk";
import type { StepA2a } from "../../core/steps";
import { agentPath } from "./agents";

/** The name of the front door's security scheme on every card: its bearer JWT. */
export const BEARER_SCHEME = "bearer";

/**
 * An agent's card: its one skill is the role's declaration (what it does, examples); its one
 * interface is JSON-RPC at `baseUrl` + `/v1/a2a/{role}`; it streams; every call needs the front
 * door's bearer token (the tenant is the token's). It takes push notification configs where the
 * stack keeps them and delivers from its event store's stream (./push-delivery.ts).
 */
export function agentCardOf(
  role: string,
  offered: StepA2a,
  baseUrl: string,
  options: { readonly pushNotifications?: boolean } = {},
): AgentCard {
  const bearer = { schemes: { [BEARER_SCHEME]: { list: [] } } };
  return {
    name: role,
    description: offered.description,
    supportedInterfaces: [
      {
        url: `${baseUrl}${agentPath(role)}`,
        protocolBinding: "JSONRPC",
        tenant: "",
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
    ],
    provider: undefined,
    version: "1",
    capabilities: {
      streaming: true,
      pushNotifications: options.pushNotifications === true,
      extensions: [],
    },
    securitySchemes: {
      [BEARER_SCHEME]: {
        scheme: {
          $case: "httpAuthSecurityScheme",
          value: {
            description: "the front door's token: the tenant is its tenant claim",
            scheme: "Bearer",
            bearerFormat: "JWT",
          },
        },
      },
    },
    securityRequirements: [bearer],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["application/json", "text/plain"],
    skills: [
      {
        id: role,
        name: role,
        description: offered.description,
        tags: [role, `workflow:${offered.workflow}`],
        examples: [...(offered.examples ?? [])],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}
