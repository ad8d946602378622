import { LocalChannel } from "../../../functions/adapters/channel/local-channel";
import { DeterministicLocalModel } from "../../../functions/adapters/local-model";
import { LocalPayments } from "../../../functions/adapters/local-payments";
import { InMemoryContentStore } from "../../../functions/core/agent/content";
import type { EventStore } from "../../../functions/core/ports";
import type { RolePorts } from "../../../functions/core/role-module";
import { InMemorySideEffects } from "../../../functions/core/side-effects";
import { ordersFrom } from "../../../functions/roles/customer-support/order-lookup/order-lookup";
import { SAMPLE_ORDERS } from "../local/orders";

/**
 * Every port a role module may need, in memory: the given store, the scripted local model (NOT a
 * model: same answer for the same request), the sample orders, a channel that only records what
 * it is sent, in-memory side-effect records and agent content, and the payment stand-in. `overrides` win (a faulty channel, a stalling
 * model). What the simulation and `testRole` build roles with.
 */
export function memoryRolePorts(store: EventStore, overrides: Partial<RolePorts> = {}): RolePorts {
  return {
    store,
    model: new DeterministicLocalModel(),
    orders: ordersFrom(SAMPLE_ORDERS),
    channel: new LocalChannel(),
    sideEffects: new InMemorySideEffects(),
    content: new InMemoryContentStore(),
    payments: new LocalPayments(),
    ...overrides,
  };
}
