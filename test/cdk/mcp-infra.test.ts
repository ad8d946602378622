import { describe, expect, it } from "vitest";
import { use, useOf } from "../../functions/core/integration";
import { mcp } from "../../functions/integrations/mcp";
import { mcpServerOf, tokenParameter } from "../../functions/integrations/mcp/aws";
import { mcpInfra } from "../../functions/integrations/mcp/infra";
import { defineTopology } from "../../lib/infra/topology";
import { single, statementsOf, synthesizeStack } from "./synth";

/**
 * The MCP integration's grants: a group that uses an MCP server may read exactly that server's
 * token, a Secrets Manager secret (through Parameter Store's reference to it) or an SSM
 * parameter, and nothing else of either service.
 */

const URL = "https://crm.example.com/mcp";

const topologyUsing = (uses: Record<"secret" | "parameter", Parameters<typeof useOf>[0]>) =>
  defineTopology({
    topics: ["commands", "events", "audit"],
    groups: (["secret", "parameter"] as const).map((name) => ({
      name: `desk-${name}`,
      role: { group: `desk-${name}`, subscriptions: ["refund.approved"] },
      handler: "functions/roles/audit/handler.ts",
      uses: [useOf(uses[name])],
    })),
  });

describe("an MCP server's token on the stack", () => {
  it("is readable by each group that uses the server, and by nothing else", () => {
    const { template } = synthesizeStack(
      {
        topology: topologyUsing({
          secret: use(mcp, { url: URL, credentials: { secret: "crm/mcp-token" } }),
          parameter: use(mcp, { url: URL, credentials: { parameter: "/crm/mcp-token" } }),
        }),
        integrations: [mcpInfra],
      },
      "AgentBus-mcp",
    );
    const grants = (group: string) =>
      statementsOf(
        template,
        single(
          template,
          "AWS::Lambda::Function",
          (fn) =>
            fn.Metadata["agentbus:kind"] === "consumer" && fn.Metadata["agentbus:group"] === group,
        ),
      )
        .filter((s) => s.Action.some((a) => /^(ssm|secretsmanager):/.test(a)))
        .map((s) => ({ action: s.Action, on: JSON.stringify(s.Resource) }));
    const secret = grants("desk-secret");
    expect(secret.map((g) => g.action)).toEqual([
      ["secretsmanager:GetSecretValue"],
      ["ssm:GetParameter"],
    ]);
    expect(secret[0]?.on).toContain(":secret:crm/mcp-token-??????");
    expect(secret[1]?.on).toContain(":parameter/aws/reference/secretsmanager/crm/mcp-token");
    const parameter = grants("desk-parameter");
    expect(parameter.map((g) => g.action)).toEqual([["ssm:GetParameter"]]);
    expect(parameter[0]?.on).toContain(":parameter/crm/mcp-token");
  });

  it("refuses a use that names no server, naming the group", () => {
    expect(() =>
      synthesizeStack(
        {
          topology: topologyUsing({ secret: mcp, parameter: mcp }),
          integrations: [mcpInfra],
        },
        "AgentBus-mcp-none",
      ),
    ).toThrow(/uses mcp without naming a server/);
    expect(() => mcpServerOf(undefined, "desk")).toThrow(/group desk uses mcp without naming/);
  });

  it("reads a secret through Parameter Store's reference, a parameter by its name", () => {
    expect(tokenParameter({ secret: "crm/mcp-token" })).toBe(
      "/aws/reference/secretsmanager/crm/mcp-token",
    );
    expect(tokenParameter({ parameter: "/crm/mcp-token" })).toBe("/crm/mcp-token");
  });
});
