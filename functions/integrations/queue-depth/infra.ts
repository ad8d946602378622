import { defineInfra } from "../../../lib/infra/integration-infra";
import { DEFAULT_QUEUE_DEPTH_THRESHOLD } from "../../roles/orchestrator/orchestrator";
import { queueDepth } from "./index";

/**
 * Each group that reads queue depths gets the DAG agents' queue URLs (`AGENT_QUEUE_URLS`, the
 * step roles, the groups whose modules declare `steps`), `QUEUE_DEPTH_THRESHOLD`, and GetQueueAttributes on
 * exactly those queues. Without agents there is nothing to read.
 */
export const queueDepthInfra = defineInfra(queueDepth, (scope, users) => {
  const agents = scope.groups.filter((g) => g.needs.steps).map((g) => g.group);
  if (agents.length === 0) return;
  const urls = Object.fromEntries(agents.map((a) => [a.groupName, a.queue.queueUrl]));
  const threshold = scope.settings.queueDepthThreshold ?? DEFAULT_QUEUE_DEPTH_THRESHOLD;
  for (const { group } of users) {
    group.consumer.addEnvironment("AGENT_QUEUE_URLS", scope.stack.toJsonString(urls));
    group.consumer.addEnvironment("QUEUE_DEPTH_THRESHOLD", String(threshold));
    for (const agent of agents) agent.queue.grant(group.consumer, "sqs:GetQueueAttributes");
  }
});
