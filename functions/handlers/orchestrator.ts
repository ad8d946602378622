import { sqsQueueDepth } from "../adapters/sqs/queue-depth";
import { describe } from "../core/errors";
import { createOrchestrator } from "../roles/orchestrator";
import { containerAwsClient } from "./aws";
import { type ConsumerOptions, createConsumerHandler, type SqsBatchHandler } from "./consumer";
import { OrchestratorEnv, parseEnv } from "./env";
import { lambdaEntry } from "./lambda-entry";
import { observability } from "./observe";

/**
 * The orchestrator's Lambda side: the shared consumer with `createOrchestrator` configured from
 * the environment. `AGENT_QUEUE_URLS` (JSON, agent group -> queue URL) turns on the queue-depth
 * gate (SQS GetQueueAttributes, cached a few seconds) at `QUEUE_DEPTH_THRESHOLD`;
 * `ORCHESTRATOR_LEASE_SECONDS`, `ORCHESTRATOR_QUEUED_LEASE_SECONDS` and
 * `ORCHESTRATOR_LEASE_REDELIVERIES` set the node leases, `ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS`
 * the default dependency timeout of a node. Without them it behaves like
 * `orchestrator`.
 */
export function createOrchestratorHandler(options: ConsumerOptions = {}): SqsBatchHandler {
  const env = parseEnv(OrchestratorEnv, options.env ?? process.env, "orchestrator");
  const obs = options.observability ?? observability("orchestrator", "orchestrator");
  const queueDepth = env.AGENT_QUEUE_URLS
    ? sqsQueueDepth({
        client: options.sqs ?? containerAwsClient(),
        queueUrls: env.AGENT_QUEUE_URLS,
        onError: (group, error) =>
          obs.logger.warn("could not read a queue depth; counting it as 0", {
            group,
            error: describe(error),
          }),
      })
    : undefined;
  const role = createOrchestrator({
    queueDepth,
    queueDepthThreshold: env.QUEUE_DEPTH_THRESHOLD,
    leaseSeconds: env.ORCHESTRATOR_LEASE_SECONDS,
    queuedLeaseSeconds: env.ORCHESTRATOR_QUEUED_LEASE_SECONDS,
    maxLeaseRedeliveries: env.ORCHESTRATOR_LEASE_REDELIVERIES,
    dependencyTimeoutSeconds: env.ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS,
  });
  return createConsumerHandler(role, { ...options, observability: obs });
}

export const { create, handler } = lambdaEntry(createOrchestratorHandler);
