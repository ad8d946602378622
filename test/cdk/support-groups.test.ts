import { describe, expect, it } from "vitest";
import { LocalChannel } from "../../functions/adapters/channel/local-channel";
import { DeterministicLocalModel } from "../../functions/adapters/local-model";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import {
  createOrderLookup,
  ordersFrom,
} from "../../functions/roles/customer-support/order-lookup/order-lookup";
import { createReplyGeneration } from "../../functions/roles/customer-support/reply-generation/reply-generation";
import {
  createSender,
  DEFAULT_MAX_UNKNOWN_ATTEMPTS,
} from "../../functions/roles/customer-support/sender/sender";
import { SUPPORT_GROUPS } from "../../lib/dev/local/conversation";
import { defineTopology, supportGroups, topology } from "../../lib/infra/topology";
import {
  agentBusStack,
  refersTo,
  resources,
  single,
  statementsOf,
  synthesizeStack,
} from "./support";

/**
 * The support roles that need a port (orders, model, channel) are declared in the topology by
 * name and subscriptions, and built with their ports by their handlers: the two must agree, or the
 * rules would route events the consumer refuses (or miss ones it needs).
 */
describe("support groups in the topology", () => {
  const version = async () => 0;
  const built = [
    createOrderLookup({ orders: ordersFrom([]) }),
    createReplyGeneration({
      model: new DeterministicLocalModel(),
      conversation: async () => ({ version: 0, context: () => [] }),
    }),
    createSender({
      channel: new LocalChannel(),
      sideEffects: new InMemorySideEffects(),
      conversationVersion: version,
    }),
  ];

  it.each(built.map((role) => [role.group, role] as const))(
    "%s: the declared group subscribes to exactly what the built role handles",
    (group, role) => {
      const declared = supportGroups.find((g) => g.name === group);
      expect(declared, `${group} is declared`).toBeDefined();
      expect([...(declared?.role.subscriptions ?? [])].sort()).toEqual(
        [...role.subscriptions].sort(),
      );
    },
  );

  it("every support group is in the project's topology, with its handler", () => {
    for (const group of supportGroups) {
      const spec = topology.groups.find((g) => g.name === group.name);
      expect(spec?.handler).toBe(group.handler);
    }
    // The local conversation run waits for exactly these groups.
    expect(supportGroups.map((g) => g.name)).toEqual([...SUPPORT_GROUPS]);
  });

  it("the sender is handed out more often than it retries an unknown outcome", () => {
    const sender = topology.groups.find((g) => g.name === "sender");
    expect(sender?.maxReceiveCount).toBeGreaterThan(DEFAULT_MAX_UNKNOWN_ATTEMPTS);
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
    const replies = single(template, "AWS::SNS::Topic", () => true);

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

    it("reply generation heartbeats (visibility only: its role sends no heartbeat message)", () => {
      expect(env("reply-generation")).toMatchObject({ HEARTBEAT_SECONDS: "20" });
      expect(Number(env("reply-generation").VISIBILITY_TIMEOUT_SECONDS)).toBeGreaterThan(0);
      expect(env("reply-generation").EVENTS_BUS_NAME).toBeUndefined();
    });
  });

  it("wires what a group declares in needs, whatever its name, and nothing by name alone", () => {
    const { template } = synthesizeStack(
      {
        topology: defineTopology({
          topics: ["commands", "events", "audit"],
          groups: [
            {
              // Another name, the order lookup's needs: it gets the orders table.
              name: "stock-check",
              role: { group: "stock-check", subscriptions: ["order.lookup.requested"] },
              handler: "functions/handlers/order-lookup.ts",
              needs: { orders: true, heartbeat: "visibility" },
            },
            {
              // The sender's name, no needs: no reply channel, no topic.
              name: "sender",
              role: { group: "sender", subscriptions: ["notification.send.requested"] },
              handler: "functions/handlers/sender.ts",
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
