import type { AwsClient } from "../../adapters/aws/client";
import { GetParameter } from "../../adapters/aws/operations";
import { PermanentError, TransientError } from "../../core/errors";
import { defineAdapter } from "../../handlers/integration-adapter";
import { type McpServerOptions, mcp } from "./index";
import { SdkMcpServer } from "./sdk-server";

/**
 * An MCP server through the official SDK's client (./sdk-server.ts), at the URL of the role's use
 * (`use(mcp, { url, credentials })`). Its bearer token is read from Systems Manager when the
 * client first connects, and again after a 401: a SecureString parameter by its name, or a
 * Secrets Manager secret through Parameter Store's reference to it
 * (`/aws/reference/secretsmanager/<secret name>`), so one SDK client reads either.
 */
export const mcpAdapter = /* @__PURE__ */ defineAdapter(mcp, ({ group, client }, options) => {
  const server = mcpServerOf(options, group);
  const credentials = server.credentials;
  if (!credentials) return new SdkMcpServer({ url: server.url });
  const ssm = client("ssm");
  return new SdkMcpServer({ url: server.url, token: () => readToken(ssm, credentials) });
});

/** The use's options, or an error naming the group and what it must say. */
export function mcpServerOf(
  options: McpServerOptions | undefined,
  group: string,
): McpServerOptions {
  if (!options?.url)
    throw new PermanentError(
      "mcp.no_server",
      `group ${group} uses mcp without naming a server: use(mcp, { url, credentials })`,
    );
  return options;
}

/** The Parameter Store name the token is read by. */
export function tokenParameter(credentials: NonNullable<McpServerOptions["credentials"]>): string {
  return "secret" in credentials
    ? `/aws/reference/secretsmanager/${credentials.secret}`
    : credentials.parameter;
}

async function readToken(
  ssm: AwsClient,
  credentials: NonNullable<McpServerOptions["credentials"]>,
): Promise<string> {
  const name = tokenParameter(credentials);
  const answer = await ssm.send(GetParameter({ Name: name, WithDecryption: true }));
  const token = answer.Parameter?.Value;
  if (!token) throw new TransientError("mcp.no_token", `the MCP token ${name} is empty`);
  return token;
}
