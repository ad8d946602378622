import { defineIntegration } from "../../core/integration";
import { InMemoryMcpServer } from "./memory";
import type { McpServerPort } from "./port";

export type { McpFault, MemoryMcpTool } from "./memory";
export { InMemoryMcpServer } from "./memory";
export type { McpCall, McpCallResult, McpListedTool, McpServerPort, McpTask } from "./port";
export { IDEMPOTENCY_KEY_META } from "./port";
export type { McpToolDeclaration, McpToolOutput, McpToolsDeclaration } from "./tools";
export { mcpListingHash, mcpTools } from "./tools";

/**
 * Where an MCP server is and how to authenticate to it: a role's use of the integration
 * (`use(mcp, { url, credentials })`). The bearer token is read at the function's start from
 * Systems Manager (a SecureString parameter) or from Secrets Manager, never from code.
 */
export interface McpServerOptions {
  /** The server's streamable HTTP endpoint (`https://crm.example.com/mcp`). */
  readonly url: string;
  /**
   * Where its bearer token is: a Secrets Manager secret (its ARN) or an SSM parameter (its name,
   * `/crm/mcp-token`). None: the server takes no token.
   */
  readonly credentials?: { readonly secret: string } | { readonly parameter: string };
}

/**
 * An MCP server's tools (streamable HTTP, ./README.md): `tools/list` and `tools/call` through the
 * official SDK's client (./aws.ts, ./sdk-server.ts); an agent uses them with `mcpTools`
 * (./tools.ts), each marked read or write, each write through the side-effect ledger. Its twin
 * is a server in memory with no tools until a test defines them (./memory.ts).
 */
export const mcp = /* @__PURE__ */ defineIntegration<McpServerPort, McpServerOptions | undefined>({
  name: "mcp",
  access: "write",
  does: "calls an MCP server's tools",
  // No server without `use(mcp, { url, ... })`: the adapter and the infrastructure refuse it.
  defaults: undefined,
  memory: () => new InMemoryMcpServer(),
  notes:
    "The server's URL and the name of its token's secret or parameter are the role's use of it; the token is read once per container (a rotated token is read again after a 401). A write whose outcome stays unknown waits for `agentbus resolve`.",
});
