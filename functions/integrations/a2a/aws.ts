import type { AwsClient } from "../../adapters/aws/client";
import { GetParameter } from "../../adapters/aws/operations";
import { PermanentError, TransientError } from "../../core/errors";
import { defineAdapter } from "../../handlers/integration-adapter";
import { tokenParameter } from "../mcp/aws";
import { type A2aAgentOptions, a2a } from "./index";
import { SdkA2aAgent } from "./sdk-agent";

/**
 * Another system's A2A agent through the official SDK's client (./sdk-agent.ts), at the card URL
 * of the role's use (`use(a2a, { url, credentials })`). Its bearer token is read as an MCP
 * server's is (functions/integrations/mcp/aws.ts): from Systems Manager, a SecureString parameter
 * by its name or a Secrets Manager secret through Parameter Store's reference to it.
 */
export const a2aAdapter = /* @__PURE__ */ defineAdapter(a2a, ({ group, client }, options) => {
  const agent = a2aAgentOf(options, group);
  const credentials = agent.credentials;
  if (!credentials) return new SdkA2aAgent({ url: agent.url });
  const ssm = client("ssm");
  return new SdkA2aAgent({ url: agent.url, token: () => readToken(ssm, credentials) });
});

/** The use's options, or an error naming the group and what it must say. */
export function a2aAgentOf(options: A2aAgentOptions | undefined, group: string): A2aAgentOptions {
  if (!options?.url)
    throw new PermanentError(
      "a2a.no_agent",
      `group ${group} uses a2a without naming an agent: use(a2a, { url, credentials })`,
    );
  return options;
}

async function readToken(
  ssm: AwsClient,
  credentials: NonNullable<A2aAgentOptions["credentials"]>,
): Promise<string> {
  const name = tokenParameter(credentials);
  const answer = await ssm.send(GetParameter({ Name: name, WithDecryption: true }));
  const token = answer.Parameter?.Value;
  if (!token) throw new TransientError("a2a.no_token", `the A2A token ${name} is empty`);
  return token;
}
