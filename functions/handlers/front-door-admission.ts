import { MetricUnit } from "@aws-lambda-powertools/metrics";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { DynamoDueIndex } from "../adapters/dynamodb/due";
import { DynamoModelControls } from "../adapters/dynamodb/model-controls";
import { DynamoRunsInFlight } from "../adapters/dynamodb/runs-in-flight";
import { DynamoTenantLimits } from "../adapters/dynamodb/tenant-limits";
import { DynamoWorkflowRegistry } from "../adapters/dynamodb/workflow-registry";
import { readQueueDepth } from "../adapters/sqs/queue-depth";
import { describe } from "../core/errors";
import type { Clock } from "../core/ports";
import { WORKFLOWS_ENV, WorkflowsJson, workflowsOf } from "../core/stack-workflows";
import type { AdmissionPorts, AdmissionSettings } from "../front-door/admission";
import { BacklogGate, BacklogQueuesJson, DEFAULT_BACKLOG } from "../front-door/backlog";
import {
  DEFAULT_REQUESTS_PER_MINUTE,
  TenantLimitOverrides,
  type TenantLimits,
} from "../front-door/limits";
import { DEFAULT_RUNS_IN_FLIGHT, type RunsInFlight } from "../front-door/runs-in-flight";
import type { FrontDoorWorkflows } from "../front-door/workflows";
import { workflowCatalog } from "../roles/orchestrator/catalog";
import { containerAwsClient } from "./aws";
import { budgetsOf, ModelBudgetEnv } from "./env";
import type { Observability } from "./observe";

/**
 * The front door's admission of new work (functions/front-door/admission.ts) as a function builds
 * it from its environment, one home for the two functions that start runs: the front door's
 * (./front-door.ts) and the stream function's A2A routes (./front-door-stream.ts). The tenants'
 * counts and controls are on the state table (requests per minute, runs in flight, the operator's
 * stops, the model calls), the backlog is the depth of the queues `BACKLOG_QUEUES` names (SQS
 * GetQueueAttributes, cached; a read that fails admits, is logged and counted as
 * `FrontDoorBacklogUnread`), and the workflows a tenant may start are the stack's (`WORKFLOWS`)
 * and the registered ones.
 */
export const AdmissionEnv = z.extend(ModelBudgetEnv, {
  STATE_TABLE: z.string().check(z.minLength(1)),
  /** Each tenant's requests per minute that put something on the bus (429 beyond). */
  TENANT_REQUESTS_PER_MINUTE: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(1_000_000)),
    DEFAULT_REQUESTS_PER_MINUTE,
  ),
  /** Each tenant's workflow runs in flight started through the front door (429 beyond). */
  TENANT_RUNS_IN_FLIGHT: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(1000)),
    DEFAULT_RUNS_IN_FLIGHT,
  ),
  /** Tenants' own limits (JSON, tenant -> `requestsPerMinute`, `runsInFlight`): functions/front-door/limits.ts. */
  TENANT_LIMITS: z.optional(z.jsonText(TenantLimitOverrides, "a JSON object of tenant -> limits")),
  /** The queues new work enters (JSON, feature -> group -> queue URLs); without it, no backlog is read. */
  BACKLOG_QUEUES: z.optional(
    z.jsonText(BacklogQueuesJson, "a JSON object of feature -> group -> queue URLs"),
  ),
  BACKLOG_THRESHOLD: z._default(
    z.coerce.number().check(z.int(), z.minimum(1)),
    DEFAULT_BACKLOG.threshold,
  ),
  BACKLOG_DRAIN_PER_SECOND: z._default(
    z.coerce.number().check(z.positive()),
    DEFAULT_BACKLOG.drainPerSecond,
  ),
  BACKLOG_CACHE_SECONDS: z._default(
    z.coerce.number().check(z.minimum(0), z.maximum(300)),
    DEFAULT_BACKLOG.cacheSeconds,
  ),
  /** The stack's workflows (the orchestrator's, JSON): listed, shown and started as scope `stack`. */
  [WORKFLOWS_ENV]: z.optional(WorkflowsJson),
});
export type AdmissionEnvValues = z.output<typeof AdmissionEnv>;

/** What replaces the admission's stores (tests). */
export interface AdmissionOptions {
  readonly limits?: TenantLimits;
  readonly runs?: RunsInFlight;
  readonly controls?: AdmissionPorts["controls"];
  readonly backlog?: AdmissionPorts["backlog"];
  /** Reads the depth of the queues new work enters (`BACKLOG_QUEUES`). */
  readonly sqs?: AwsClient;
}

/** The limits the environment sets. */
export function admissionSettingsOf(env: AdmissionEnvValues): Required<AdmissionSettings> {
  return {
    requestsPerMinute: env.TENANT_REQUESTS_PER_MINUTE,
    runsInFlight: env.TENANT_RUNS_IN_FLIGHT,
    tenantLimits: env.TENANT_LIMITS ?? {},
  };
}

/** The admission's ports on the state table and the entry queues (or what `options` gives). */
export function admissionPortsOf(
  env: AdmissionEnvValues,
  options: AdmissionOptions,
  deps: { readonly dynamodb: AwsClient; readonly clock: Clock; readonly observed: Observability },
): AdmissionPorts {
  const { dynamodb, clock } = deps;
  const backlog = options.backlog ?? backlogOf(env, options, deps.observed, clock);
  return {
    limits:
      options.limits ?? new DynamoTenantLimits({ client: dynamodb, tableName: env.STATE_TABLE }),
    runs: options.runs ?? new DynamoRunsInFlight({ client: dynamodb, tableName: env.STATE_TABLE }),
    controls:
      options.controls ??
      new DynamoModelControls({
        client: dynamodb,
        tableName: env.STATE_TABLE,
        budgets: budgetsOf(env),
      }),
    // The runs' states (BatchGetItem), read only when a tenant is at its cap.
    states: new DynamoDueIndex({ client: dynamodb, stateTable: env.STATE_TABLE }),
    ...(backlog ? { backlog } : {}),
    clock,
  };
}

/** The workflow registry on the state table and the stack's workflows (`WORKFLOWS`). */
export function frontDoorWorkflowsOf(
  env: AdmissionEnvValues,
  dynamodb: AwsClient,
  stepRoles: readonly string[],
): FrontDoorWorkflows {
  return {
    registry: new DynamoWorkflowRegistry({ client: dynamodb, tableName: env.STATE_TABLE }),
    stepRoles,
    compiled: workflowCatalog(workflowsOf(env[WORKFLOWS_ENV])),
  };
}

/**
 * The backlog check on the queues `BACKLOG_QUEUES` names (none without it): each depth read by
 * GetQueueAttributes at most once per `BACKLOG_CACHE_SECONDS`; a read that fails admits, is
 * logged and counted (`FrontDoorBacklogUnread`).
 */
function backlogOf(
  env: AdmissionEnvValues,
  options: AdmissionOptions,
  { tracer, logger, metrics }: Observability,
  clock: Clock,
): BacklogGate | undefined {
  if (!env.BACKLOG_QUEUES) return undefined;
  const sqs = tracer.capture(options.sqs ?? containerAwsClient());
  return new BacklogGate({
    queues: env.BACKLOG_QUEUES,
    read: (url) => readQueueDepth(sqs, url),
    clock,
    settings: {
      threshold: env.BACKLOG_THRESHOLD,
      drainPerSecond: env.BACKLOG_DRAIN_PER_SECOND,
      cacheSeconds: env.BACKLOG_CACHE_SECONDS,
    },
    onUnread: (queueUrl, error) => {
      logger.warn("could not read a queue's depth; admitting", {
        queue_url: queueUrl,
        error: describe(error),
      });
      metrics.addMetric("FrontDoorBacklogUnread", MetricUnit.Count, 1);
    },
  });
}
