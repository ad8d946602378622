import { describe, expect, it } from "vitest";
import { useOf } from "../../functions/core/integration";
import { InMemoryEventStore } from "../../functions/core/memory";
import { buildRole } from "../../functions/core/role-module";
import { orders as ordersIntegration } from "../../functions/roles/customer-support/integrations/orders";
import { DEFAULT_MAX_UNKNOWN_ATTEMPTS } from "../../functions/roles/customer-support/sender/sender";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { SUPPORT_GROUPS } from "../../lib/dev/local/conversation";
import { memoryRolePorts } from "../../lib/dev/role-kit/memory-ports";
import { topology } from "../../lib/infra/project";
import { defineTopology, groupOf } from "../../lib/infra/topology";
import { agentBusStack, refersTo, resources, single, statementsOf, synthesizeStack } from "./synth";

/**
 * Each role module declares its group by its descriptor and builds its decision with its ports:
 * the two must agree, or the rules would route events the consumer refuses (or miss ones it
 * needs).
 */
describe("role modules in the topology", () => {
  it.each(ROLE_MODULES.map((module) => [module.descriptor.group, module] as const))(
    "%s: the built role is the declared group and subscribes to exactly what it declares",
    (group, module) => {
      const role = buildRole(module, memoryRolePorts(new InMemoryEventStore(), module.uses));
      expect(role.group).toBe(group);
      expect([...role.subscriptions].sort()).toEqual([...module.descriptor.subscriptions].sort());
      expect(role.stateOf).toBe(module.descriptor.stateOf);
    },
  );

  it("every module is a group of the project's topology, with its entry", () => {
    expect(topology.groups.map((g) => g.name)).toEqual(ROLE_MODULES.map((m) => m.descriptor.group));
    for (const module of ROLE_MODULES) {
      const spec = topology.groups.find((g) => g.name === module.descriptor.group);
      expect(spec?.handler).toBe(groupOf(module).handler);
    }
    // The local conversation run waits for exactly the customer-support groups.
    const support = ROLE_MODULES.filter((m) => m.entry.includes("/customer-support/"));
    expect(support.map((m) => m.descriptor.group)).toEqual([...SUPPORT_GROUPS]);
  });

  it("the sender is handed out more often than it retries an unknown outcome", () => {
    const sender = topology.groups.find((g) => g.name === "sender");
    expect(sender?.maxReceiveCount).toBeGreaterThan(DEFAULT_MAX_UNKNOWN_ATTEMPTS);
  });

  it("every group on a conversation's way to its reply bounds a tenant to 2 of its 3 invocations", () => {
    const onTheWay = ["conversation", "router", "order-lookup", "refund-review"];
    for (const name of [...onTheWay, "reply-generation", "sender"]) {
      const spec = topology.groups.find((g) => g.name === name);
      expect([name, spec?.maxConcurrency, spec?.tenantConcurrency]).toEqual([name, 3, 2]);
    }
  });

  describe("in the synthesized stack", () => {
    const { template } = agentBusStack();
    const consumer = (group: string) =>
      single(
        template,
        "AWS::Lambda::Function",
        (fn) =>
          fn.Metadata["agentbus:kind"] === "consumer" && fn.Metadata["agentbus:group"] === group,
      );
    const env = (group: string) =>
      (consumer(group).Properties.Environment as { Variables: Record<string, unknown> }).Variables;
    const orders = single(template, "AWS::DynamoDB::Table", (t) =>
      t.id.startsWith("SupportOrders"),
    );
    const replies = single(template, "AWS::SNS::Topic", (t) => t.id.startsWith("SupportReplies"));

    it("the dispatchers of tenant-bounded groups key by tenant lane, the others by order key", () => {
      const dispatchers = resources(template, "AWS::Lambda::Function").filter(
        (fn) => fn.Metadata["agentbus:kind"] === "dispatch",
      );
      const lanes = Object.fromEntries(
        dispatchers.map((fn) => [
          fn.Metadata["agentbus:group"],
          (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables
            .TENANT_CONCURRENCY,
        ]),
      );
      for (const spec of topology.groups.filter((g) => g.ordering === "fifo"))
        expect([spec.name, lanes[spec.name]]).toEqual([
          spec.name,
          spec.tenantConcurrency === undefined ? undefined : String(spec.tenantConcurrency),
        ]);
      expect(lanes["reply-generation"]).toBe("2");
      expect(lanes["task-projection"]).toBeUndefined();
      const mapping = single(
        template,
        "AWS::Lambda::EventSourceMapping",
        (m) => refersTo(m.Properties.FunctionName) === consumer("reply-generation").id,
      );
      expect(mapping.Properties.ScalingConfig).toEqual({ MaximumConcurrency: 3 });
    });

    it("order lookup reads the orders table, with GetItem only", () => {
      expect(refersTo(env("order-lookup").ORDERS_TABLE)).toBe(orders.id);
      const onOrders = statementsOf(template, consumer("order-lookup")).filter((s) =>
        JSON.stringify(s.Resource).includes(orders.id),
      );
      expect(onOrders.flatMap((s) => s.Action)).toEqual(["dynamodb:GetItem"]);
    });

    it("the sender reads the orders table again before sending, with GetItem only", () => {
      expect(refersTo(env("sender").ORDERS_TABLE)).toBe(orders.id);
      const onOrders = statementsOf(template, consumer("sender")).filter((s) =>
        JSON.stringify(s.Resource).includes(orders.id),
      );
      expect(onOrders.flatMap((s) => s.Action)).toEqual(["dynamodb:GetItem"]);
    });

    it("the sender publishes to the SNS FIFO reply topic and nothing else may", () => {
      expect(replies.Properties.FifoTopic).toBe(true);
      expect(env("sender")).toMatchObject({ CHANNEL_PROVIDER: "sns" });
      expect(refersTo(env("sender").CHANNEL_TOPIC_ARN)).toBe(replies.id);
      const publishers = resources(template, "AWS::Lambda::Function").filter((fn) =>
        statementsOf(template, fn).some((s) => s.Action.includes("sns:Publish")),
      );
      expect(publishers.map((fn) => fn.Metadata["agentbus:group"])).toEqual(["sender"]);
    });

    it("the refund agent cancels orders (GetItem, UpdateItem) and alone pays through the payment stand-in", () => {
      expect(refersTo(env("refund-review").ORDERS_TABLE)).toBe(orders.id);
      const onOrders = statementsOf(template, consumer("refund-review")).filter((s) =>
        JSON.stringify(s.Resource).includes(orders.id),
      );
      expect(onOrders.flatMap((s) => s.Action).sort()).toEqual([
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
      ]);
      const payments = single(template, "AWS::DynamoDB::Table", (t) =>
        t.id.startsWith("SupportPaymentsStandIn"),
      );
      expect(refersTo(env("refund-review").PAYMENTS_TABLE)).toBe(payments.id);
      const payers = resources(template, "AWS::Lambda::Function").filter((fn) =>
        statementsOf(template, fn).some((s) => JSON.stringify(s.Resource).includes(payments.id)),
      );
      expect(payers.map((fn) => fn.Metadata["agentbus:group"])).toEqual(["refund-review"]);
      const onPayments = statementsOf(template, consumer("refund-review")).filter((s) =>
        JSON.stringify(s.Resource).includes(payments.id),
      );
      expect(onPayments.flatMap((s) => s.Action).sort()).toEqual([
        "dynamodb:ConditionCheckItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
      ]);
      // Only the refund agent may change an order.
      const cancellers = resources(template, "AWS::Lambda::Function").filter((fn) =>
        statementsOf(template, fn).some(
          (s) =>
            JSON.stringify(s.Resource).includes(orders.id) &&
            s.Action.includes("dynamodb:UpdateItem"),
        ),
      );
      expect(cancellers.map((fn) => fn.Metadata["agentbus:group"])).toEqual(["refund-review"]);
    });

    it("reply generation heartbeats (visibility only: its role sends no heartbeat message)", () => {
      expect(env("reply-generation")).toMatchObject({ HEARTBEAT_SECONDS: "20" });
      expect(Number(env("reply-generation").VISIBILITY_TIMEOUT_SECONDS)).toBeGreaterThan(0);
      expect(env("reply-generation").EVENTS_BUS_NAME).toBeUndefined();
    });
  });

  it("wires the integrations a group uses, whatever its name, and nothing by name alone", () => {
    const { template } = synthesizeStack(
      {
        topology: defineTopology({
          topics: ["commands", "events", "audit"],
          groups: [
            {
              // Another name, the order lookup's integration: it gets the orders table.
              name: "stock-check",
              role: { group: "stock-check", subscriptions: ["order.lookup.requested"] },
              handler: "functions/roles/customer-support/order-lookup/handler.ts",
              needs: { heartbeat: "visibility" },
              uses: [useOf(ordersIntegration)],
            },
            {
              // The sender's name, no integrations: no reply channel, no topic.
              name: "sender",
              role: { group: "sender", subscriptions: ["notification.send.requested"] },
              handler: "functions/roles/customer-support/sender/handler.ts",
            },
          ],
        }),
      },
      "AgentBus-needs",
    );
    const env = (group: string) =>
      (
        single(
          template,
          "AWS::Lambda::Function",
          (fn) =>
            fn.Metadata["agentbus:kind"] === "consumer" && fn.Metadata["agentbus:group"] === group,
        ).Properties.Environment as { Variables: Record<string, unknown> }
      ).Variables;
    const orders = single(template, "AWS::DynamoDB::Table", (t) =>
      t.id.startsWith("SupportOrders"),
    );
    expect(refersTo(env("stock-check").ORDERS_TABLE)).toBe(orders.id);
    expect(env("stock-check")).toMatchObject({ HEARTBEAT_SECONDS: "20" });
    expect(env("sender").CHANNEL_TOPIC_ARN).toBeUndefined();
    const publishers = resources(template, "AWS::Lambda::Function").filter((fn) =>
      statementsOf(template, fn).some((s) => s.Action.includes("sns:Publish")),
    );
    expect(publishers).toEqual([]);
  });
});
