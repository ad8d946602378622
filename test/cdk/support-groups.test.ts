import { describe, expect, it } from "vitest";
import { LocalChannel } from "../../functions/adapters/channel/local-channel";
import { DeterministicLocalModel } from "../../functions/adapters/local-model";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { createOrderLookup, ordersFrom } from "../../functions/roles/order-lookup";
import { createReplyGeneration } from "../../functions/roles/reply-generation";
import { createSender, DEFAULT_MAX_UNKNOWN_ATTEMPTS } from "../../functions/roles/sender";
import { SUPPORT_GROUPS } from "../../lib/local/conversation";
import { supportGroups, topology } from "../../lib/topology";

/**
 * The support roles that need a port (orders, model, channel) are declared in the topology by
 * name and subscriptions, and built with their ports by their handlers: the two must agree, or the
 * rules would route events the consumer refuses (or miss ones it needs).
 */
describe("support groups in the topology", () => {
  const version = async () => 0;
  const built = [
    createOrderLookup({ orders: ordersFrom([]) }),
    createReplyGeneration({ model: new DeterministicLocalModel(), conversationVersion: version }),
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
});
