import { defineIntegration } from "../../core/integration";

/** Messages waiting in each agent group's queue, by group name (missing groups count as 0). */
export type QueueDepthSource = (
  groups: readonly string[],
) => Readonly<Record<string, number>> | Promise<Readonly<Record<string, number>>>;

/**
 * The depth of the DAG agents' queues, which the orchestrator reads to hold back new work for a
 * busy agent (backpressure). Undefined where no depths are known (no agents, or the twin): then
 * nothing is held back. A depth changes from call to call, so a role that reads it is not a fold.
 */
export const queueDepth = /* @__PURE__ */ defineIntegration<QueueDepthSource | undefined>({
  name: "queueDepth",
  access: "read",
  does: "reads its agents' queue depths",
  defaults: undefined,
  memory: () => undefined,
});
