import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoTaskPushConfigs } from "../adapters/dynamodb/task-push-configs";
import { sleep } from "../core/batching";
import { parseEnv } from "../core/parse-env";
import type { Clock, EventStore } from "../core/ports";
import { systemClock } from "../core/runtime";
import type { TaskPushConfigs } from "../front-door/a2a/push-configs";
import {
  deliverTaskPushes,
  PUSH_DELIVERY_DEFAULTS,
  type PushDeliveryPorts,
} from "../front-door/a2a/push-delivery";
import { containerAwsClient } from "./aws";
import { lambdaEntry } from "./lambda-entry";
import { type Observability, observability } from "./observe";

/**
 * The A2A tasks' push notifications (functions/front-door/a2a/push-delivery.ts), from the push
 * queue: the relay sends it the stored events that move a task (functions/front-door/a2a/
 * push-events.ts), each run's in its own FIFO message group, and the queue's event source mapping
 * hands them over in batches; each batch's runs are delivered side by side. A webhook that fails
 * is retried here, then recorded on its task's record and reported (`A2aPushFailed`, an error log
 * naming the task, config and reason). A run whose tables fail, or a message that is no stored
 * event, is named in the batch response (`batchItemFailures`, from that message to the end of its
 * run's group), and only those are received again; after the queue's last receive they wait in
 * its dead-letter queue.
 */
export const A2aPushEnv = z.object({
  STATE_TABLE: z.string().check(z.minLength(1)),
  /** The local stack's allowance of loopback webhooks (never set by the CDK stack). */
  A2A_PUSH_ALLOW_LOOPBACK: z.optional(z.enum(["true", "false"])),
  A2A_PUSH_ATTEMPTS: z._default(z.coerce.number().check(z.int(), z.minimum(1), z.maximum(10)), 3),
  A2A_PUSH_TIMEOUT_MS: z._default(
    z.coerce.number().check(z.int(), z.minimum(100), z.maximum(30_000)),
    5000,
  ),
});

export interface A2aPushHandlerOptions {
  readonly env?: Record<string, string | undefined>;
  readonly dynamodb?: AwsClient;
  readonly clock?: Clock;
  readonly observability?: Observability;
  /** Replace the runs' reader and the push records (tests). */
  readonly store?: Pick<EventStore, "load">;
  readonly configs?: TaskPushConfigs;
  readonly post?: PushDeliveryPorts["post"];
  readonly resolve?: PushDeliveryPorts["resolve"];
  readonly sleep?: (ms: number) => Promise<void>;
}

export type A2aPushHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

export function createA2aPushHandler(options: A2aPushHandlerOptions = {}): A2aPushHandler {
  const env = parseEnv(A2aPushEnv, options.env ?? process.env, "a2a-push");
  const { logger, metrics, tracer } = options.observability ?? observability("a2a-push");
  const dynamodb = tracer.capture(options.dynamodb ?? containerAwsClient());
  const tables = { state: env.STATE_TABLE, events: "", inbox: "" };
  const ports: PushDeliveryPorts = {
    store: options.store ?? new DynamoConsumerStore({ client: dynamodb, tables }),
    configs:
      options.configs ??
      new DynamoTaskPushConfigs({ client: dynamodb, tableName: env.STATE_TABLE }),
    clock: options.clock ?? systemClock,
    sleep: options.sleep ?? sleep,
    ...(options.post ? { post: options.post } : {}),
    ...(options.resolve ? { resolve: options.resolve } : {}),
  };
  const settings = {
    ...PUSH_DELIVERY_DEFAULTS,
    attempts: env.A2A_PUSH_ATTEMPTS,
    timeoutMs: env.A2A_PUSH_TIMEOUT_MS,
    allowLoopback: env.A2A_PUSH_ALLOW_LOOPBACK === "true",
  };
  return async (event) => {
    const { outcomes, retried } = await deliverTaskPushes(event.Records, ports, settings);
    for (const outcome of outcomes)
      for (const failure of outcome.failed)
        logger.error("an A2A push notification was not taken", {
          run_id: outcome.runId,
          ...failure,
        });
    for (const again of retried)
      logger.error("an A2A push message will be received again", {
        message_id: again.messageId,
        run_id: again.runId,
        error: again.reason,
      });
    const sent = outcomes.reduce((n, o) => n + o.delivered.length, 0);
    const failed = outcomes.reduce((n, o) => n + o.failed.length, 0);
    if (sent) metrics.addMetric("A2aPushDelivered", MetricUnit.Count, sent);
    if (failed) metrics.addMetric("A2aPushFailed", MetricUnit.Count, failed);
    if (retried.length) metrics.addMetric("A2aPushRetried", MetricUnit.Count, retried.length);
    metrics.publishStoredMetrics();
    return { batchItemFailures: retried.map((r) => ({ itemIdentifier: r.messageId })) };
  };
}

export const { create, handler } = lambdaEntry(createA2aPushHandler);
