import { defineInfra } from "../../../lib/infra/integration-infra";
import { mcpInfra } from "../mcp/infra";
import { a2a } from "./index";

/**
 * Nothing is provisioned: the agent is outside the stack and its token is the team's secret or
 * parameter. Each group that uses an agent may read exactly that agent's token, granted as for an
 * MCP server's (functions/integrations/mcp/infra.ts). A use without an agent fails the synth,
 * naming the group.
 */
export const a2aInfra = defineInfra(a2a, (scope, users) => {
  for (const { group, options } of users)
    if (!options?.url)
      throw new Error(
        `group ${group.node.id} uses a2a without naming an agent: use(a2a, { url, credentials })`,
      );
  mcpInfra.wire(scope, users);
});
