import { describe, expect, it } from "vitest";
import { use, useOf } from "../../functions/core/integration";
import { a2a } from "../../functions/integrations/a2a";
import { a2aAgentOf } from "../../functions/integrations/a2a/aws";
import { a2aInfra } from "../../functions/integrations/a2a/infra";
import { defineTopology } from "../../lib/infra/topology";
import { single, statementsOf, synthesizeStack } from "./synth";

/**
 * The A2A integration's grants: a group that uses another system's agent may read exactly that
 * agent's token (granted as an MCP server's is), and a use that names no agent fails the synth.
 */

const CARD = "https://billing.partner.example/.well-known/agent-card.json";

const topologyUsing = (uses: Parameters<typeof useOf>[0]) =>
  defineTopology({
    topics: ["commands", "events", "audit"],
    groups: [
      {
        name: "billing",
        role: { group: "billing", subscriptions: ["refund.approved"] },
        handler: "functions/roles/audit/handler.ts",
        uses: [useOf(uses)],
      },
    ],
  });

describe("an A2A agent's token on the stack", () => {
  it("is readable by the group that uses the agent", () => {
    const { template } = synthesizeStack(
      {
        topology: topologyUsing(
          use(a2a, { url: CARD, credentials: { parameter: "/partner/a2a" } }),
        ),
        integrations: [a2aInfra],
      },
      "AgentBus-a2a",
    );
    const billing = single(
      template,
      "AWS::Lambda::Function",
      (fn) =>
        fn.Metadata["agentbus:kind"] === "consumer" && fn.Metadata["agentbus:group"] === "billing",
    );
    const grants = statementsOf(template, billing).filter((s) =>
      s.Action.some((a) => /^(ssm|secretsmanager):/.test(a)),
    );
    expect(grants.map((s) => s.Action)).toEqual([["ssm:GetParameter"]]);
    expect(JSON.stringify(grants[0]?.Resource)).toContain(":parameter/partner/a2a");
  });

  it("refuses a use that names no agent, naming the group", () => {
    expect(() =>
      synthesizeStack(
        { topology: topologyUsing(a2a), integrations: [a2aInfra] },
        "AgentBus-a2a-none",
      ),
    ).toThrow(/group Billing uses a2a without naming an agent/);
    expect(() => a2aAgentOf(undefined, "billing")).toThrow(/group billing uses a2a without naming/);
  });
});
