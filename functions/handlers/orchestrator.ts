import * as z from "../../schemas/zod";
import { sqsQueueDepth } from "../adapters/sqs/queue-depth";
import { describe } from "../core/errors";
import { createOrchestrator } from "../roles/orchestrator/orchestrator";
import { containerAwsClient } from "./aws";
import { type ConsumerOptions, createConsumerHandler, type SqsBatchHandler } from "./consumer";
import { parseEnv } from "./env";
import { lambdaEntry } from "./lambda-entry";
import { observability } from "./observe";

/** Agent group -> queue URL, as a JSON object (the orchestrator's queue-depth gate). */
const QueueUrls = z.pipe(
  z.pipe(
    z.string(),
    z.transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.issues.push({
          code: "custom",
          message: "must be a JSON object of group -> queue URL",
          input: text,
        });
        return z.NEVER;
      }
    }),
  ),
  z.record(z.string().check(z.minLength(1)), z.url()),
);

/** The orchestrator's own settings, on top of ConsumerEnv. */
export const OrchestratorEnv = z.object({
  /** Without it there is no queue-depth gate. */
  AGENT_QUEUE_URLS: z.optional(QueueUrls),
  QUEUE_DEPTH_THRESHOLD: z.optional(z.coerce.number().check(z.int(), z.minimum(1))),
  /** Lease of a node whose agent has started on it, in seconds. */
  ORCHESTRATOR_LEASE_SECONDS: z.optional(z.coerce.number().check(z.positive())),
  /** How long a request may wait in its agent's queue before its outcome counts as unknown. */
  ORCHESTRATOR_QUEUED_LEASE_SECONDS: z.optional(z.coerce.number().check(z.positive())),
  /** How many times an assignment whose lease ran out is sent again before its node fails. */
  ORCHESTRATOR_LEASE_REDELIVERIES: z.optional(z.coerce.number().check(z.int(), z.minimum(0))),
  /** How long a node may wait for its inputs when its workflow does not say, in seconds. */
  ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS: z.optional(
    z.coerce.number().check(z.int(), z.positive()),
  ),
});
export type OrchestratorEnv = z.output<typeof OrchestratorEnv>;

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
