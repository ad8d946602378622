import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { LambdaFunctionURLEvent } from "aws-lambda";
import { type CryptoKey, createRemoteJWKSet, type JWTVerifyGetKey } from "jose";
import { registry } from "../../schemas";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { DynamoContentStore } from "../adapters/dynamodb/content";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoTaskPushConfigs } from "../adapters/dynamodb/task-push-configs";
import { DynamoTenantRunIndex } from "../adapters/dynamodb/tenant-runs";
import { EventBridgePublisher } from "../adapters/eventbridge/publisher";
import { sleep as wait } from "../core/batching";
import { parseEnv } from "../core/parse-env";
import type { Clock, EventStore } from "../core/ports";
import { systemClock, ulidSource } from "../core/runtime";
import { A2aAgents } from "../front-door/a2a/agents";
import type { TaskPushConfigs } from "../front-door/a2a/push-configs";
import { type A2aAnswer, type A2aService, answerA2a, isA2aPath } from "../front-door/a2a/serve";
import {
  fail,
  type HttpRequest,
  lowerCaseHeaders,
  ProblemError,
  problemResponse,
} from "../front-door/http";
import { callerOf } from "../front-door/identity";
import { openStream, STREAM_HEADERS, type StreamPorts } from "../front-door/stream";
import { verifyToken } from "../front-door/token";
import { FeatureList } from "../roles/features";
import { containerAwsClient } from "./aws";
import {
  AdmissionEnv,
  type AdmissionOptions,
  admissionPortsOf,
  admissionSettingsOf,
  frontDoorWorkflowsOf,
} from "./front-door-admission";
import { type Observability, observability } from "./observe";
import { installLazySourceMaps } from "./source-maps";
import { vaultOf } from "./vault";

/**
 * The front door's stream function (functions/front-door/stream.ts), behind a Lambda function URL
 * whose responses stream (`RESPONSE_STREAM`): HTTP APIs cannot stream a response, so the stream
 * has its own URL (output `FrontDoorStreamUrl`). The URL takes any request (auth type NONE), so the
 * function verifies the token as the HTTP API's JWT authorizer does (../front-door/token.ts):
 * an RSA signature by the issuer's JWKS (found by OIDC discovery, or `JWKS_URL`), `iss`, `aud`,
 * `exp` (required), `nbf`. The token comes in `Authorization: Bearer <token>` or, for a
 * browser's EventSource (which cannot set headers), the query's `access_token`. A HEAD request is
 * answered the stream's head, no events. It reads the state table (the conversation views and
 * the runs) and, for the AG-UI routes, the events table (`EVENTS_TABLE`), opening personal fields
 * with the customer keys where the stack keeps them (`CUSTOMER_KEYS_*`: ./vault), and the
 * agents' model turns and tools' answers in the content store (on the state table) for their
 * tool calls' inputs and outputs. A message that starts an A2A task is admitted as the front door
 * admits a run's start (./front-door-admission.ts: the limits, the backlog, the workflows, from
 * the same variables as the front door's).
 */
export const FrontDoorStreamEnv = z.extend(AdmissionEnv, {
  /** The event store, which the AG-UI routes read (left out: they answer 404 `not_served`). */
  EVENTS_TABLE: z.optional(z.string().check(z.minLength(1))),
  JWT_ISSUER: z.string().check(z.minLength(1)),
  /** The accepted audiences, comma-separated. */
  JWT_AUDIENCE: z.string().check(z.minLength(1)),
  /** Where the issuer's keys are, when not at its OIDC discovery document's `jwks_uri`. */
  JWKS_URL: z.optional(z.string().check(z.minLength(1))),
  TENANT_CLAIM: z._default(z.string().check(z.minLength(1)), "tenant_id"),
  STREAM_POLL_MS: z._default(
    z.coerce.number().check(z.int(), z.minimum(50), z.maximum(60_000)),
    1000,
  ),
  STREAM_MAX_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(890)),
    300,
  ),
  STREAM_HEARTBEAT_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(300)),
    15,
  ),
  /** The stack's features (functions/roles/features.ts), a comma list. Left out: every feature. */
  FEATURES: z.optional(FeatureList),
  /**
   * The step roles the stack offers over A2A, JSON by role (functions/front-door/a2a/card.ts).
   * Left out: none, and the A2A routes answer 404 `not_served`.
   */
  A2A_AGENTS: z.optional(z.string().check(z.minLength(2))),
  /** The commands bus, where an A2A message starts, answers or cancels a run. */
  BUS_COMMANDS: z.optional(z.string().check(z.minLength(1))),
  /**
   * `on` where the stack delivers A2A push notifications (its a2a-push function, on a queue the
   * relay feeds): the agents then take push configs, kept on the state table.
   */
  A2A_PUSH: z.optional(z.enum(["on", "off"])),
  /** The local stack's allowance of loopback webhooks (never set by the CDK stack). */
  A2A_PUSH_ALLOW_LOOPBACK: z.optional(z.enum(["true", "false"])),
  /** The audit topic's bus, where a caller's answer to an A2A task is recorded. */
  BUS_AUDIT: z.optional(z.string().check(z.minLength(1))),
});
type FrontDoorStreamEnvValues = z.output<typeof FrontDoorStreamEnv>;

/** The response as it is streamed: its head once, then its body as it comes. */
export interface ResponseWriter {
  write(text: string): void;
  end(): void;
  closed(): boolean;
}
export type Respond = (statusCode: number, headers: Record<string, string>) => ResponseWriter;

export type FrontDoorStreamHandler = (
  event: LambdaFunctionURLEvent,
  respond: Respond,
) => Promise<void>;

export interface FrontDoorStreamOptions extends AdmissionOptions {
  readonly env?: Record<string, string | undefined>;
  readonly dynamodb?: AwsClient;
  readonly clock?: Clock;
  readonly observability?: Observability;
  /** Replaces the state table's reader (tests). */
  readonly store?: Pick<EventStore, "load">;
  /** Replaces the event store's reader and the vault, for the AG-UI routes (tests). */
  readonly events?: StreamPorts["events"];
  /** Unwraps the customers' data keys (with `CUSTOMER_KEYS_*`: ./vault). */
  readonly kms?: AwsClient;
  /** Replaces the EventBridge client the A2A routes put commands with (tests). */
  readonly eventbridge?: AwsClient;
  /** Replaces the A2A tasks' push configs on the state table (tests). */
  readonly pushConfigs?: TaskPushConfigs;
  /** The issuer's key (a local issuer's), instead of its JWKS. */
  readonly jwtKey?: CryptoKey | JWTVerifyGetKey;
  readonly sleep?: (ms: number) => Promise<void>;
}

export function createFrontDoorStreamHandler(
  options: FrontDoorStreamOptions = {},
): FrontDoorStreamHandler {
  const rawEnv = options.env ?? process.env;
  const env = parseEnv(FrontDoorStreamEnv, rawEnv, "front-door-stream");
  const observed = options.observability ?? observability("front-door-stream");
  const { logger, metrics, tracer } = observed;
  const key = verificationKey(options.jwtKey, env.JWT_ISSUER, env.JWKS_URL);
  const audience = env.JWT_AUDIENCE.split(",").map((a) => a.trim());
  const settings = streamSettingsOf(env);
  const clock = options.clock ?? systemClock;
  const dynamodb = tracer.capture(options.dynamodb ?? containerAwsClient());
  const tables = { state: env.STATE_TABLE, events: env.EVENTS_TABLE ?? "", inbox: "" };
  const dynamo = new DynamoConsumerStore({ client: dynamodb, tables });
  const store = options.store ?? dynamo;
  const events = options.events ?? eventsOf(rawEnv, dynamo, { dynamodb, kms: options.kms }, clock);
  const sleep = options.sleep ?? wait;
  const a2a = a2aOf(env, options, { store, events, clock, sleep, dynamodb, observed });
  return async (event, respond) => {
    const request = requestOf(event);
    const claims = () => verifiedClaims(tokenOf(event), key, env.JWT_ISSUER, audience);
    const callerNow = async () => callerOf(await claims(), env.TENANT_CLAIM);
    try {
      if (isA2aPath(request.path))
        return write(
          await answerA2a({ ...request, ...bodyOf(event) }, { ...a2a, caller: callerNow }),
          respond,
        );
      const caller = await callerNow();
      const ports = { store, clock, sleep, ...(events ? { events } : {}) };
      const stream = await openStream(request, caller, ports, settings);
      if (request.method === "HEAD") return respond(200, { ...STREAM_HEADERS }).end();
      metrics.addMetric("FrontDoorStreamOpened", MetricUnit.Count, 1);
      metrics.publishStoredMetrics();
      const out = respond(200, { ...STREAM_HEADERS });
      await stream.run(out);
      out.end();
    } catch (error) {
      const answer =
        error instanceof ProblemError
          ? problemResponse(error.problem, request.requestId)
          : problemResponse(
              { code: "internal", detail: "the stream failed; connect again" },
              request.requestId,
            );
      if (!(error instanceof ProblemError))
        logger.error("stream failed", { error: error as Error, path: event.rawPath });
      const single = metrics.singleMetric();
      single.addDimension("code", error instanceof ProblemError ? error.problem.code : "internal");
      single.addMetric("FrontDoorProblem", MetricUnit.Count, 1);
      const out = respond(answer.statusCode, { ...answer.headers });
      out.write(answer.body);
      out.end();
    }
  };
}

/** How the streams poll, how long they last, their heartbeat, the stack's features. */
function streamSettingsOf(env: FrontDoorStreamEnvValues) {
  return {
    pollMs: env.STREAM_POLL_MS,
    maxSeconds: env.STREAM_MAX_SECONDS,
    heartbeatSeconds: env.STREAM_HEARTBEAT_SECONDS,
    ...(env.FEATURES ? { features: env.FEATURES } : {}),
  };
}

/**
 * The A2A routes' agents and ports: the state table's runs and each tenant's list of them (its
 * by-tenant-status index, for `ListTasks`), the runs' streams (where a refused start says why), the
 * commands bus, the admission, the tasks' push configs.
 */
function a2aOf(
  env: FrontDoorStreamEnvValues,
  options: FrontDoorStreamOptions,
  deps: {
    store: Pick<EventStore, "load">;
    events: StreamPorts["events"];
    clock: Clock;
    sleep: (ms: number) => Promise<void>;
    dynamodb: AwsClient;
    observed: Observability;
  },
): Omit<A2aService, "caller"> {
  const { store, events, clock, sleep, dynamodb, observed } = deps;
  const agents = env.A2A_AGENTS ? A2aAgents.parse(JSON.parse(env.A2A_AGENTS)) : {};
  const publisher = new EventBridgePublisher({
    client: observed.tracer.capture(options.eventbridge ?? containerAwsClient()),
    buses: {
      ...(env.BUS_COMMANDS ? { commands: env.BUS_COMMANDS } : {}),
      ...(env.BUS_AUDIT ? { audit: env.BUS_AUDIT } : {}),
    },
  });
  const pushConfigs = pushConfigsOf(env, options.pushConfigs, dynamodb);
  const admission = {
    ...admissionPortsOf(env, options, { dynamodb, clock, observed }),
    workflows: frontDoorWorkflowsOf(env, dynamodb, []),
  };
  return {
    agents,
    ports: {
      store,
      clock,
      sleep,
      publisher,
      registry,
      ids: ulidSource(clock),
      admission,
      runIndex: new DynamoTenantRunIndex({ client: dynamodb, tableName: env.STATE_TABLE }),
      ...(events ? { runEvents: events } : {}),
      ...(pushConfigs ? { pushConfigs } : {}),
    },
    settings: {
      pollMs: env.STREAM_POLL_MS,
      maxSeconds: env.STREAM_MAX_SECONDS,
      allowLoopbackPush: env.A2A_PUSH_ALLOW_LOOPBACK === "true",
      limits: admissionSettingsOf(env),
    },
  };
}

/** Where A2A tasks' push configs are kept, where the stack delivers them (`A2A_PUSH`). */
function pushConfigsOf(
  env: FrontDoorStreamEnvValues,
  given: TaskPushConfigs | undefined,
  dynamodb: AwsClient,
): TaskPushConfigs | undefined {
  if (env.A2A_PUSH !== "on") return undefined;
  return given ?? new DynamoTaskPushConfigs({ client: dynamodb, tableName: env.STATE_TABLE });
}

/** Write an A2A answer: whole, or its server-sent events as they come. */
async function write(answer: A2aAnswer, respond: Respond): Promise<void> {
  const out = respond(answer.status, { ...answer.headers });
  if ("body" in answer) out.write(answer.body);
  else
    for await (const text of answer.stream) {
      if (out.closed()) break;
      out.write(text);
    }
  out.end();
}

/** A function URL request's body, as text. */
function bodyOf(event: LambdaFunctionURLEvent): { body?: string } {
  if (event.body === undefined) return {};
  return {
    body: event.isBase64Encoded ? Buffer.from(event.body, "base64").toString("utf8") : event.body,
  };
}

/**
 * The event store's streams with the vault's opening, where the function has an events table, and
 * the content store on the state table (the agents' tool calls' inputs and outputs).
 */
function eventsOf(
  env: Readonly<Record<string, string | undefined>>,
  dynamo: DynamoConsumerStore,
  clients: { dynamodb: AwsClient; kms: AwsClient | undefined },
  clock: Clock,
): StreamPorts["events"] {
  if (!env.EVENTS_TABLE || !env.STATE_TABLE) return undefined;
  const kms = clients.kms ?? containerAwsClient();
  const vault = vaultOf(env, { dynamodb: clients.dynamodb, kms }, clock);
  return {
    readStream: (stream, from, to) => dynamo.readStream(stream, from, to),
    content: new DynamoContentStore({ client: clients.dynamodb, tableName: env.STATE_TABLE }),
    ...(vault ? { open: (envelopes) => vault.openAll(envelopes) } : {}),
  };
}

/** What checks a token's signature: the key given (or its getter), else the issuer's JWKS. */
function verificationKey(
  given: CryptoKey | JWTVerifyGetKey | undefined,
  issuer: string,
  jwksUrl: string | undefined,
): JWTVerifyGetKey {
  if (given === undefined) return issuerKeys(issuer, jwksUrl);
  return typeof given === "function" ? given : async () => given;
}

/** The issuer's signing keys: its JWKS, at `jwksUrl` or where its discovery document says. */
function issuerKeys(issuer: string, jwksUrl: string | undefined): JWTVerifyGetKey {
  let keys: Promise<JWTVerifyGetKey> | undefined;
  const found = async () => {
    if (jwksUrl) return createRemoteJWKSet(new URL(jwksUrl));
    const discovery = `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
    const response = await fetch(discovery);
    if (!response.ok)
      throw new Error(`the issuer's discovery document answered ${response.status}`);
    const { jwks_uri } = (await response.json()) as { jwks_uri?: string };
    if (!jwks_uri) throw new Error("the issuer's discovery document names no jwks_uri");
    return createRemoteJWKSet(new URL(jwks_uri));
  };
  return async (header, token) => {
    keys ??= found().catch((error: unknown) => {
      keys = undefined;
      throw error;
    });
    return (await keys)(header, token);
  };
}

function tokenOf(event: LambdaFunctionURLEvent): string | undefined {
  const authorization = event.headers?.authorization ?? event.headers?.Authorization;
  const bearer = /^Bearer\s+(\S+)$/i.exec(authorization ?? "")?.[1];
  return bearer ?? event.queryStringParameters?.access_token;
}

/** The token's claims, verified as the HTTP API's JWT authorizer verifies them (else 401). */
async function verifiedClaims(
  token: string | undefined,
  key: JWTVerifyGetKey,
  issuer: string,
  audience: string[],
): Promise<Record<string, unknown>> {
  // The challenge's parameters are comma-separated (RFC 9110 §11.6.1, RFC 6750 §3).
  const refuse = (problem: string): never =>
    fail("unauthorized", problem, {
      headers: {
        "www-authenticate": `Bearer error="invalid_token", error_description="${problem}"`,
      },
    });
  if (!token) return refuse("no bearer token in the Authorization header or access_token");
  const verified = await verifyToken(token, key, { issuer, audience });
  return "claims" in verified ? verified.claims : refuse(verified.problem);
}

function requestOf(event: LambdaFunctionURLEvent): HttpRequest {
  return {
    method: event.requestContext.http.method,
    path: event.rawPath,
    headers: lowerCaseHeaders(event.headers),
    requestId: event.requestContext.requestId,
  };
}

/** What the Node.js Lambda runtime gives a streaming function (the global `awslambda`). */
interface LambdaStreaming {
  streamifyResponse(
    handler: (event: LambdaFunctionURLEvent, stream: NodeJS.WritableStream) => Promise<void>,
  ): unknown;
  HttpResponseStream: {
    from(
      stream: NodeJS.WritableStream,
      prelude: { statusCode: number; headers: Record<string, string> },
    ): NodeJS.WritableStream & { destroyed?: boolean; writableEnded?: boolean };
  };
}

export const create = createFrontDoorStreamHandler;

let instance: FrontDoorStreamHandler | undefined;
const lambda = (globalThis as { awslambda?: Partial<LambdaStreaming> }).awslambda;
const streaming =
  typeof lambda?.streamifyResponse === "function" && lambda.HttpResponseStream
    ? (lambda as LambdaStreaming)
    : undefined;
/** The Lambda entry point: the Lambda runtime streams what the handler writes. */
export const handler = streaming
  ? streaming.streamifyResponse(async (event, responseStream) => {
      if (instance === undefined) {
        installLazySourceMaps();
        instance = createFrontDoorStreamHandler();
      }
      await instance(event, (statusCode, headers) => {
        const stream = streaming.HttpResponseStream.from(responseStream, { statusCode, headers });
        return {
          write: (text) => stream.write(text),
          end: () => stream.end(),
          closed: () => stream.destroyed === true || stream.writableEnded === true,
        };
      });
    })
  : async () => {
      throw new Error(
        "the stream function runs in the Lambda runtime (awslambda.streamifyResponse); elsewhere use create(options)",
      );
    };
