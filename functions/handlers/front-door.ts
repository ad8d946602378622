import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type {
  APIGatewayProxyEventV2WithJWTAuthorizer,
  APIGatewayProxyStructuredResultV2,
} from "aws-lambda";
import { registry as defaultRegistry, type EventRegistry } from "../../schemas";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { DynamoAcceptedRequests } from "../adapters/dynamodb/accepted-requests";
import { DynamoClientSequences } from "../adapters/dynamodb/client-sequences";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoTenantRunIndex } from "../adapters/dynamodb/tenant-runs";
import { DynamoTraceReader } from "../adapters/dynamodb/trace-reader";
import { EventBridgePublisher } from "../adapters/eventbridge/publisher";
import { parseEnv } from "../core/parse-env";
import type { Clock, EventPublisher } from "../core/ports";
import { systemClock, ulidSource } from "../core/runtime";
import { STEP_ROLES_ENV, StepRolesJson } from "../core/steps";
import type { AcceptedRequests } from "../front-door/accepted";
import { type FrontDoorPorts, type FrontDoorSettings, handleRequest } from "../front-door/api";
import type { ClientSequences } from "../front-door/client-seq";
import { type HttpRequest, lowerCaseHeaders } from "../front-door/http";
import { FeatureList } from "../roles/features";
import { containerAwsClient } from "./aws";
import { customerErasure } from "./customer-erasure";
import {
  AdmissionEnv,
  type AdmissionOptions,
  admissionPortsOf,
  admissionSettingsOf,
  frontDoorWorkflowsOf,
} from "./front-door-admission";
import { inServerSpan, type ServedRequest } from "./hop-spans";
import { lambdaEntry } from "./lambda-entry";
import { type Observability, observability } from "./observe";
import { vaultOf } from "./vault";

/**
 * The front door's function, behind API Gateway's HTTP API (payload format 2.0) and its JWT
 * authorizer (a service's routes: IAM authorization): the request and the verified claims go to
 * functions/front-door/api.ts. It reads the state table (the conversation views, the runs'
 * states, the accepted requests, the tenants' counts, the conversations' client sequences, the
 * registered workflows; it registers a tenant's own), the events table (a task's events, a refused
 * start's reason on its run's stream) and puts accepted messages on the events and commands buses. With `BACKLOG_QUEUES` it reads the depth of the queues new work enters
 * (SQS GetQueueAttributes, cached: functions/front-door/backlog.ts). Each answer is counted:
 * `FrontDoorAccepted`, and `FrontDoorProblem` by its `code` (bad JSON, a body too large, no
 * tenant, a backlog, ...); a queue depth it could not read, `FrontDoorBacklogUnread`.
 */
export const FrontDoorEnv = z.extend(AdmissionEnv, {
  EVENTS_TABLE: z.string().check(z.minLength(1)),
  BUS_EVENTS: z.string().check(z.minLength(1)),
  BUS_COMMANDS: z.optional(z.string().check(z.minLength(1))),
  /** The audit topic's bus, where an erasure is recorded (the events bus when there is none). */
  BUS_AUDIT: z.optional(z.string().check(z.minLength(1))),
  /**
   * The customer-keys table: with it, services may erase customers (./customer-erasure), and what
   * is put on the bus is sealed (with `CUSTOMER_KEYS_KMS_KEY`: ./vault).
   */
  CUSTOMER_KEYS_TABLE: z.optional(z.string().check(z.minLength(1))),
  /** The token claim that names the tenant. */
  TENANT_CLAIM: z._default(z.string().check(z.minLength(1)), "tenant_id"),
  /** The scope that makes a token a service's, which may name a message's customer (none: no token's). */
  SERVICE_SCOPE: z.optional(z.string().check(z.minLength(1))),
  MAX_BODY_BYTES: z._default(
    z.coerce.number().check(z.int(), z.minimum(1024), z.maximum(1024 * 1024)),
    16 * 1024,
  ),
  /**
   * The stack's features (functions/roles/features.ts), a comma list: the routes of another answer
   * 404 `not_served`. Left out: every feature.
   */
  FEATURES: z.optional(FeatureList),
  /** The stack's step roles (the orchestrator's table, JSON): what a registered workflow's nodes may name. */
  [STEP_ROLES_ENV]: z.optional(StepRolesJson),
});

export interface FrontDoorOptions extends AdmissionOptions {
  readonly env?: Record<string, string | undefined>;
  readonly dynamodb?: AwsClient;
  readonly eventbridge?: AwsClient;
  /** Makes and unwraps the customers' data keys (with `CUSTOMER_KEYS_*`: ./vault). */
  readonly kms?: AwsClient;
  readonly clock?: Clock;
  readonly registry?: EventRegistry;
  readonly observability?: Observability;
  /** Replaces the EventBridge publisher (tests). */
  readonly publisher?: EventPublisher;
  readonly accepted?: AcceptedRequests;
  readonly sequences?: ClientSequences;
}

export type FrontDoorHandler = (
  event: APIGatewayProxyEventV2WithJWTAuthorizer,
) => Promise<APIGatewayProxyStructuredResultV2>;

export function createFrontDoorHandler(options: FrontDoorOptions = {}): FrontDoorHandler {
  const env = parseEnv(FrontDoorEnv, options.env ?? process.env, "front-door");
  const observed = options.observability ?? observability("front-door");
  const { logger, metrics, telemetry } = observed;
  const ports = { ...portsOf(env, options, observed), log: logger };
  const settings = settingsOf(env);
  const answer = async (
    event: APIGatewayProxyEventV2WithJWTAuthorizer,
    request: HttpRequest,
  ): Promise<APIGatewayProxyStructuredResultV2> => {
    try {
      const response = await handleRequest(request, ports, settings);
      if (response.statusCode >= 400) {
        const code = (JSON.parse(response.body) as { code?: string }).code ?? "unknown";
        const single = metrics.singleMetric();
        single.addDimension("code", code);
        single.addMetric("FrontDoorProblem", MetricUnit.Count, 1);
        logger.info("refused", { code, status: response.statusCode, path: event.rawPath });
      } else if (response.statusCode === 202) {
        metrics.addMetric("FrontDoorAccepted", MetricUnit.Count, 1);
      }
      return response;
    } catch (error) {
      logger.error("front door failed", { error: error as Error, path: event.rawPath });
      metrics.addMetric("FrontDoorError", MetricUnit.Count, 1);
      return internalError(event.requestContext.requestId);
    } finally {
      metrics.publishStoredMetrics();
    }
  };
  // Each request in its server span, the parent of the messages it accepts (./hop-spans.ts).
  return async (event) => {
    await telemetry.ready;
    const request = requestOf(event);
    try {
      return await inServerSpan(servedOf(event, request), (traceparent) =>
        answer(event, withTraceparent(request, traceparent)),
      );
    } finally {
      await telemetry.flush();
    }
  };
}

/** What the request's server span reads: the route is API Gateway's (none for `$default`). */
function servedOf(
  event: APIGatewayProxyEventV2WithJWTAuthorizer,
  request: HttpRequest,
): ServedRequest {
  const route = event.routeKey?.split(" ")[1];
  const traceparent = request.headers.traceparent;
  return {
    method: request.method,
    path: request.path,
    ...(route ? { route } : {}),
    ...(traceparent ? { traceparent } : {}),
  };
}

/** The request with the `traceparent` its messages start from (the server span's, if recorded). */
function withTraceparent(request: HttpRequest, traceparent: string | undefined): HttpRequest {
  if (traceparent === undefined || traceparent === request.headers.traceparent) return request;
  return { ...request, headers: { ...request.headers, traceparent } };
}

type FrontDoorEnvValues = z.output<typeof FrontDoorEnv>;

/** What the routes are told: the token's claims, the body's size, the tenants' limits, the features. */
function settingsOf(env: FrontDoorEnvValues): FrontDoorSettings {
  return {
    tenantClaim: env.TENANT_CLAIM,
    ...(env.SERVICE_SCOPE ? { serviceScope: env.SERVICE_SCOPE } : {}),
    maxBodyBytes: env.MAX_BODY_BYTES,
    ...admissionSettingsOf(env),
    ...(env.FEATURES ? { features: env.FEATURES } : {}),
  };
}

/** The routes' ports on the function's tables, buses and queues (or what `options` gives instead). */
function portsOf(
  env: FrontDoorEnvValues,
  options: FrontDoorOptions,
  observed: Observability,
): FrontDoorPorts {
  const dynamodb = observed.tracer.capture(options.dynamodb ?? containerAwsClient());
  const clock = options.clock ?? systemClock;
  const kms = observed.tracer.capture(options.kms ?? containerAwsClient());
  const vault = vaultOf(options.env ?? process.env, { dynamodb, kms }, clock);
  return {
    ...(vault ? { sealer: vault } : {}),
    publisher: options.publisher ?? publisherOf(env, options, observed.tracer),
    ...storesOf(env, options, dynamodb),
    ...admissionPortsOf(env, options, { dynamodb, clock, observed }),
    registry: options.registry ?? defaultRegistry,
    workflows: frontDoorWorkflowsOf(env, dynamodb, Object.keys(env[STEP_ROLES_ENV] ?? {}).sort()),
    ids: ulidSource(clock),
    ...(env.CUSTOMER_KEYS_TABLE
      ? {
          erasure: customerErasure(dynamodb, {
            state: env.STATE_TABLE,
            events: env.EVENTS_TABLE,
            customerKeys: env.CUSTOMER_KEYS_TABLE,
          }),
        }
      : {}),
  };
}

/** The events, commands and audit buses accepted messages go to. */
function publisherOf(
  env: FrontDoorEnvValues,
  options: FrontDoorOptions,
  tracer: Observability["tracer"],
): EventPublisher {
  return new EventBridgePublisher({
    client: tracer.capture(options.eventbridge ?? containerAwsClient()),
    buses: {
      events: env.BUS_EVENTS,
      commands: env.BUS_COMMANDS,
      audit: env.BUS_AUDIT ?? env.BUS_EVENTS,
    },
  });
}

/**
 * What the routes read and keep: projections, a task's events, the runs' streams (where a refused
 * start says why), a tenant's runs (the state table's by-tenant-status index), accepted requests,
 * client sequences.
 */
function storesOf(env: FrontDoorEnvValues, options: FrontDoorOptions, dynamodb: AwsClient) {
  const store = new DynamoConsumerStore({
    client: dynamodb,
    tables: { state: env.STATE_TABLE, events: env.EVENTS_TABLE, inbox: "" },
  });
  return {
    store,
    runEvents: store,
    tasks: new DynamoTraceReader({
      client: dynamodb,
      tables: { events: env.EVENTS_TABLE, inbox: "" },
    }),
    runIndex: new DynamoTenantRunIndex({ client: dynamodb, tableName: env.STATE_TABLE }),
    accepted:
      options.accepted ??
      new DynamoAcceptedRequests({ client: dynamodb, tableName: env.STATE_TABLE }),
    sequences:
      options.sequences ??
      new DynamoClientSequences({ client: dynamodb, tableName: env.STATE_TABLE }),
  };
}

/** A 500 that says nothing of the inside, for an error no route expected. */
function internalError(requestId: string): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: 500,
    headers: { "content-type": "application/problem+json" },
    body: JSON.stringify({
      type: "https://agentbus.dev/problems/internal",
      title: "internal",
      status: 500,
      code: "internal",
      detail: "AgentBus failed to answer; send the request again (with the same Idempotency-Key)",
      instance: requestId,
    }),
  };
}

/** What the routes read of an HTTP API request (payload format 2.0). */
export function requestOf(event: APIGatewayProxyEventV2WithJWTAuthorizer): HttpRequest {
  const claims = event.requestContext.authorizer?.jwt?.claims;
  // A service route's IAM authorization gives the signer's ARN instead of claims.
  const { iam } = (event.requestContext.authorizer ?? {}) as { iam?: { userArn?: string } };
  return {
    method: event.requestContext.http.method,
    path: event.rawPath,
    headers: lowerCaseHeaders(event.headers),
    ...(event.queryStringParameters ? { query: event.queryStringParameters } : {}),
    ...(event.body === undefined ? {} : { body: event.body }),
    isBase64Encoded: event.isBase64Encoded,
    ...(claims ? { claims } : {}),
    ...(iam?.userArn ? { principal: iam.userArn } : {}),
    requestId: event.requestContext.requestId,
  };
}

export const { create, handler } = lambdaEntry(createFrontDoorHandler);
