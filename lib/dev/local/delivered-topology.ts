import { taskProjection } from "../../../functions/roles/task-projection/task-projection";
import type { Delivery } from "../../infra/constructs/consumer-group-rules";
import { defineTopology, type Topology } from "../../infra/topology";

/**
 * A stack whose only consumer group is the task projection, delivered `delivery`: what the
 * delivery e2e tests and the bench's delivery section (bin/bench/delivery.ts) compare one
 * delivery with another on.
 */
export function taskProjectionDelivered(delivery: Delivery): Topology {
  return defineTopology({
    topics: ["commands", "events", "audit"],
    groups: [
      {
        name: "task-projection",
        role: taskProjection,
        handler: "functions/roles/task-projection/handler.ts",
        delivery,
      },
    ],
  });
}
