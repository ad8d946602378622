import { Stack } from "aws-cdk-lib";
import { AttributeType, BillingMode, Table } from "aws-cdk-lib/aws-dynamodb";
import { describe, expect, it } from "vitest";
import { defineIntegration, use, useOf } from "../../functions/core/integration";
import { orders } from "../../functions/roles/customer-support/integrations/orders";
import { ordersInfra } from "../../functions/roles/customer-support/integrations/orders/infra";
import { defineInfra } from "../../lib/infra/integration-infra";
import { defineTopology } from "../../lib/infra/topology";
import { refersTo, resources, single, statementsOf, synthesizeStack } from "./synth";

/** An integration a team adds, with its own table: a ledger its groups write entries to. */
interface Ledger {
  record(key: string): Promise<void>;
}
const ledger = defineIntegration<Ledger, { readonly audit: boolean }>({
  name: "ledger",
  access: "write",
  does: "records ledger entries",
  defaults: { audit: false },
  memory: () => ({ record: async () => {} }),
});
const ledgerInfra = defineInfra(ledger, (scope, users) => {
  const table = new Table(scope.stack, "Ledger", {
    partitionKey: { name: "entry", type: AttributeType.STRING },
    billingMode: BillingMode.PAY_PER_REQUEST,
  });
  for (const { group, options } of users) {
    group.consumer.addEnvironment("LEDGER_TABLE", table.tableName);
    table.grant(group.consumer, ...(options.audit ? ["dynamodb:Query"] : ["dynamodb:PutItem"]));
  }
  scope.output("LedgerTableName", table.tableName, "the ledger's entries");
});

/** Two groups on the audit group's entry (any entry will do for the synth). */
const topologyUsing = (uses: {
  writer: Parameters<typeof useOf>[0][];
  auditor: Parameters<typeof useOf>[0][];
}) =>
  defineTopology({
    topics: ["commands", "events", "audit"],
    groups: (["writer", "auditor"] as const).map((name) => ({
      name: `ledger-${name}`,
      role: { group: `ledger-${name}`, subscriptions: ["refund.approved"] },
      handler: "functions/roles/audit/handler.ts",
      uses: uses[name].map(useOf),
    })),
  });

const consumerOf = (template: ReturnType<typeof synthesizeStack>["template"], group: string) =>
  single(
    template,
    "AWS::Lambda::Function",
    (fn) => fn.Metadata["agentbus:kind"] === "consumer" && fn.Metadata["agentbus:group"] === group,
  );

describe("integrations on the stack", () => {
  it("wires a team's integration once, with each group's options, and nothing for the rest", () => {
    const { template } = synthesizeStack(
      {
        topology: topologyUsing({ writer: [ledger], auditor: [use(ledger, { audit: true })] }),
        integrations: [ledgerInfra],
      },
      "AgentBus-ledger",
    );
    const tables = resources(template, "AWS::DynamoDB::Table", (t) => t.id.startsWith("Ledger"));
    expect(tables).toHaveLength(1);
    const table = tables[0]?.id;
    const env = (group: string) =>
      (consumerOf(template, group).Properties.Environment as { Variables: Record<string, unknown> })
        .Variables;
    expect(refersTo(env("ledger-writer").LEDGER_TABLE)).toBe(table);
    expect(refersTo(env("ledger-auditor").LEDGER_TABLE)).toBe(table);
    const actionsOn = (group: string) =>
      statementsOf(template, consumerOf(template, group))
        .filter((s) => JSON.stringify(s.Resource).includes(table ?? "?"))
        .flatMap((s) => s.Action);
    expect(actionsOn("ledger-writer")).toEqual(["dynamodb:PutItem"]);
    expect(actionsOn("ledger-auditor")).toEqual(["dynamodb:Query"]);
    expect(template.findOutputs("LedgerTableName")).not.toEqual({});
    // No group uses the reference applications' integrations: none of their resources is built.
    expect(resources(template, "AWS::SNS::Topic", (t) => t.id.startsWith("Support"))).toEqual([]);
    expect(template.findOutputs("OrdersTableName")).toEqual({});
  });

  it("refuses a group whose integration the stack has no infrastructure for, naming both", () => {
    expect(() =>
      synthesizeStack(
        { topology: topologyUsing({ writer: [ledger], auditor: [] }), integrations: [] },
        "AgentBus-no-ledger",
      ),
    ).toThrow(
      /consumer group "ledger-writer" uses the ledger integration, but the stack was given no infrastructure for it/,
    );
  });

  it("refuses two different integrations of one name", () => {
    const impostor = defineIntegration({ ...ledger });
    expect(() =>
      synthesizeStack(
        {
          topology: topologyUsing({ writer: [ledger], auditor: [] }),
          integrations: [ledgerInfra, defineInfra(impostor, () => {})],
        },
        "AgentBus-two-ledgers",
      ),
    ).toThrow(/two integrations are named "ledger"/);
  });

  it("keeps the reference application's resources where deployed stacks have them", () => {
    const { stack } = synthesizeStack(
      {
        topology: topologyUsing({ writer: [orders], auditor: [] }),
        integrations: [ordersInfra],
      },
      "AgentBus-orders-path",
    );
    const tables = stack.node.findAll().filter((c) => c instanceof Table);
    // The hub's own tables aside (the event store's, the customers' keys).
    const ordersTables = tables.filter((t) => !/\/(Tables|CustomerKeys)\//.test(t.node.path));
    expect(ordersTables.map((t) => t.node.path)).toEqual(["AgentBus-orders-path/Support/Orders"]);
    expect(Stack.of(ordersTables[0] as Table)).toBe(stack);
  });
});
