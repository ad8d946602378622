import { taskProjectionModule } from "../../../functions/roles/task-projection/index";
import type { Delivery } from "../../infra/constructs/consumer-group-rules";
import { defineTopology, groupOf, type Topology } from "../../infra/topology";

/**
 * A stack whose only consumer group is the task projection, delivered `delivery`: what the
 * delivery e2e tests and the bench's delivery section (bin/bench/delivery.ts) compare one
 * delivery with another on.
 */
export function taskProjectionDelivered(delivery: Delivery): Topology {
  return defineTopology({
    topics: ["commands", "events", "audit"],
    groups: [{ ...groupOf(taskProjectionModule), delivery }],
  });
}
