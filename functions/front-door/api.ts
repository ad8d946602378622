import { createHash } from "node:crypto";
import { DEFAULT_TENANT, type Envelope, type EventRegistry, tenantOf } from "../../schemas";
import { CONVERSATION_AGGREGATE } from "../../schemas/events/conversation";
import { OpaqueId, tenantConversationId } from "../../schemas/ids";
import * as z from "../../schemas/zod";
import { RUN_STATUSES } from "../core/dag/run";
import { AgentBusError } from "../core/errors";
import type { ModelControls } from "../core/model-guard";
import { isSealed, SEALED_PREFIX } from "../core/personal-data/vault";
import type { Clock, EventPublisher, EventStore, IdSource, StateReader } from "../core/ports";
import { retentionDays } from "../core/retention";
import { startTraceparent } from "../core/trace-context";
import type { ConversationState } from "../roles/customer-support/conversation/conversation";
import type {
  ConversationTurn,
  ConversationView,
} from "../roles/customer-support/conversation-projection/conversation-projection";
import { ALL_FEATURES, type Feature } from "../roles/features";
import type { OrchestratorState } from "../roles/orchestrator/state";
import type { AcceptedRequest, AcceptedRequests } from "./accepted";
import { countRun, takeRequest } from "./admission";
import type { BacklogGate } from "./backlog";
import { type ClientSequences, claimOrRefuse } from "./client-seq";
import {
  ConversationResponse,
  EraseCustomerBody,
  ErasureResponse,
  MessageAcceptedResponse,
  PostMessageBody,
  ProblemResponse,
  PutWorkflowBody,
  RunAcceptedResponse,
  RunListResponse,
  RunResponse,
  StartRunBody,
  TaskResponse,
  WorkflowListResponse,
  WorkflowPutResponse,
  WorkflowResponse,
} from "./contract";
import { type CustomerErasure, eraseForService } from "./erasure";
import {
  bodyOf,
  fail,
  type HttpRequest,
  type HttpResponse,
  header,
  issue,
  json,
  matchPath,
  ProblemError,
  pathMatches,
  problemResponse,
} from "./http";
import { type Caller, callerOf, ownCustomerOf, serviceCallerOf } from "./identity";
import {
  DEFAULT_REQUESTS_PER_MINUTE,
  type TenantLimitOverrides,
  type TenantLimits,
} from "./limits";
import openapi from "./openapi.json";
import {
  DEFAULT_RUN_PAGE,
  type ListedRun,
  listRuns,
  MAX_RUN_PAGE,
  runCursor,
  runListQueryOf,
  type TenantRunIndex,
} from "./run-list";
import {
  type CountedRun,
  DAG_RUN,
  DEFAULT_RUNS_IN_FLIGHT,
  type RunsInFlight,
} from "./runs-in-flight";
import { checkServed, servedDocument } from "./served";
import { loadStoredRun, type RunStreams, type StartRefusal, type StoredRun } from "./stored-run";
import {
  checkRunInput,
  type FrontDoorWorkflows,
  getTenantWorkflow,
  listTenantWorkflows,
  putTenantWorkflow,
  tenantWorkflow,
} from "./workflows";

/** The aggregate type of a run's state (its home is ./runs-in-flight). */
export { DAG_RUN };

/**
 * The front door (seed 000 §10: 用户 -> 会话 API -> 任务状态库 + Outbox): the HTTP API clients use
 * instead of signing AWS requests, versioned under `/v1`. Each route checks the caller (./identity),
 * validates what it is sent (400 with every issue), and either puts one accepted event on its
 * topic's bus or reads a projection, answering only for the caller's tenant: another tenant's id
 * answers 404, the same as an id that does not exist.
 *
 * `GET /v1/tasks/{id}` lists what the task's steps stored (types and times, never payloads).
 *
 * Workflows (./workflows): a tenant lists, reads (a version with `?version=`) and registers
 * (`PUT`) its own and sees the shared ones and the stack's. Starting a run: the body is the run's input, checked against the workflow's
 * declared input (400 with every problem); it becomes the `workflow.start.requested` an operator
 * would send (a new run `run_<event id>`, on the commands
 * bus), and `GET /v1/runs/{id}` reads the run's state: each node's state and output. A tenant's
 * runs in flight are capped (./runs-in-flight): a start over the cap answers 429.
 *
 * Posting a message: the body (at most `maxBodyBytes`, JSON) becomes a
 * `conversation.message.received` (unsequenced, aggregate `conversation/<id>`, a new task) with
 * the caller's tenant and user and its place in the conversation, `client_seq` (the one sent or
 * the next one: ./client-seq); 202 gives the ids to follow and the place. A conversation is its
 * customer's (`conversationOf`): a user reads and writes only their own customer's, and another
 * customer's answers 404 as one that does not exist. With an `Idempotency-Key` (the caller's own),
 * the envelope and the answer are stored first (./accepted) and every retry puts that same
 * envelope again and gives the same answer; the same key with another request is refused (409).
 *
 * The conversation and run routes are the reference applications' (their `feature`): a stack
 * whose roles do not do that work answers them 404 `not_served` (./served.ts), and the OpenAPI
 * document it serves leaves them out.
 */

export interface FrontDoorPorts {
  readonly publisher: EventPublisher;
  /** The projections the reads answer from (state items only). */
  readonly store: Pick<EventStore, "load">;
  readonly accepted: AcceptedRequests;
  /** Each conversation's client sequences (./client-seq). */
  readonly sequences: ClientSequences;
  /** The events a task's steps stored (its task roots' correlations, the events table's trace index). */
  readonly tasks: { eventsByTask(taskId: string): Promise<Envelope[]> };
  /**
   * The runs' streams (the events table), where the orchestrator's refusal of a start says why and
   * whose start it was (./stored-run.ts); absent, a refused start is shown without its reason.
   */
  readonly runEvents?: RunStreams;
  /** Each tenant's cap on the requests that put something on the bus. */
  readonly limits: TenantLimits;
  /** The operator's stops and each tenant's model calls (./limits.ts, `tenantRefusal`). */
  readonly controls: Pick<ModelControls, "read">;
  /** Each tenant's runs in flight, and the runs' states that say which have ended. */
  readonly runs: RunsInFlight;
  /**
   * The backlog of the groups new work enters (./backlog.ts): a message or a start is refused
   * (429 `backlog`) while one is over its threshold. Absent: no backlog is looked at.
   */
  readonly backlog?: Pick<BacklogGate, "refusal">;
  readonly states: StateReader;
  /**
   * Each tenant's runs by status, newest first (./run-list.ts: the state table's by-tenant-status
   * index); absent, `GET /v1/runs` answers 404 `not_served`.
   */
  readonly runIndex?: TenantRunIndex;
  readonly registry: EventRegistry;
  readonly ids: IdSource;
  readonly clock: Clock;
  /**
   * Seals the personal fields of what is put on the bus (the function's vault,
   * functions/core/personal-data/vault.ts): the buses, their archives and the queues then hold a
   * customer's words sealed under their key; absent where the stack keeps no customer keys.
   */
  readonly sealer?: { seal(envelope: Envelope): Promise<Envelope> };
  /** Erases customers (./erasure); absent where the stack keeps no customer keys. */
  readonly erasure?: CustomerErasure;
  /**
   * The workflow registry, the stack's step roles and its workflows (./workflows); absent: no
   * workflow is started, and the registry's routes answer 404 `not_served`.
   */
  readonly workflows?: FrontDoorWorkflows;
  /** Where what a service does for a customer is logged (the function's logger). */
  readonly log?: { info(message: string, details: Record<string, unknown>): void };
}

export interface FrontDoorSettings {
  /** The token claim that names the tenant. @default "tenant_id" */
  readonly tenantClaim?: string;
  /**
   * The scope that makes a token a service's, which may name the customer a message is from
   * (./identity). @default none: only services signing with AWS credentials may
   */
  readonly serviceScope?: string;
  /** Largest body taken, in bytes. @default 16 KiB */
  readonly maxBodyBytes?: number;
  /**
   * How long a key's request is remembered.
   * @default - the declared retention of `acceptedRequests` (functions/core/retention.ts, a day)
   */
  readonly idempotencyHours?: number;
  /** Each tenant's requests per minute that put something on the bus (./limits). @default 600 */
  readonly requestsPerMinute?: number;
  /** Each tenant's cap on workflow runs in flight (./runs-in-flight). @default 20 */
  readonly runsInFlight?: number;
  /**
   * Tenants' own limits (either or both of the two above), by tenant id (./limits).
   * @default none: every tenant has the two above
   */
  readonly tenantLimits?: TenantLimitOverrides;
  /**
   * The stack's features (functions/roles/features.ts): a route of another answers 404
   * `not_served` (./served.ts). @default every feature
   */
  readonly features?: readonly Feature[];
}

export const DEFAULT_MAX_BODY_BYTES = 16 * 1024;
export const DEFAULT_IDEMPOTENCY_HOURS = retentionDays("acceptedRequests") * 24;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
export const CONVERSATION_VIEW = "conversation_view";

export interface RouteContext {
  readonly request: HttpRequest;
  readonly params: Readonly<Record<string, string>>;
  readonly ports: FrontDoorPorts;
  readonly settings: Required<Omit<FrontDoorSettings, "serviceScope">>;
  /** Who calls (401/403 when the request does not say). */
  readonly who: () => Caller;
}

/** A route: what it serves, what it takes and gives (the OpenAPI document is made from these). */
export interface Route {
  readonly method: "GET" | "POST" | "PUT";
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  /**
   * Who may call: `jwt`, a client with a token of the issuer (the tenant from its claims); `iam`,
   * a service signing with AWS credentials (SigV4) for the tenant its path names; `none`, anyone.
   */
  readonly auth: "jwt" | "iam" | "none";
  /** The feature the route serves, if it is one's: a stack without it does not serve it (./served.ts). */
  readonly feature?: Feature;
  readonly body?: z.core.$ZodType;
  /** The query parameters it reads (each optional), as the OpenAPI document describes them. */
  readonly query?: Readonly<
    Record<string, { readonly description: string; readonly schema: Record<string, unknown> }>
  >;
  readonly idempotent?: boolean;
  /**
   * What the function answers (a 401 never comes from it: the route's authorizer answers that);
   * the OpenAPI document adds the 500 and API Gateway's own answers (lib/dev/openapi.ts).
   */
  readonly responses: Readonly<Record<number, { description: string; schema?: z.core.$ZodType }>>;
  run(context: RouteContext): Promise<HttpResponse>;
}

const problems = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [status, { description: "a problem", schema: ProblemResponse }]),
  );

const CLIENT_ROUTES: readonly Route[] = [
  {
    method: "GET",
    path: "/v1/openapi.json",
    operationId: "getOpenApi",
    summary: "This API's OpenAPI document",
    auth: "none",
    responses: { 200: { description: "the OpenAPI 3.1 document of the routes served here" } },
    run: async ({ settings }) => json(200, servedDocument(openapi, settings.features)),
  },
  {
    method: "POST",
    path: "/v1/conversations/{conversation_id}/messages",
    operationId: "postMessage",
    summary: "Send a customer's message; the reply follows on the conversation",
    auth: "jwt",
    feature: "conversations",
    body: PostMessageBody,
    idempotent: true,
    responses: {
      202: { description: "accepted: the ids to follow", schema: MessageAcceptedResponse },
      ...problems(400, 403, 404, 409, 413, 415, 429, 503),
    },
    run: postMessage,
  },
  {
    method: "GET",
    path: "/v1/conversations/{conversation_id}",
    operationId: "getConversation",
    summary: "A conversation: its turns, their status and replies",
    auth: "jwt",
    feature: "conversations",
    responses: {
      200: { description: "the conversation", schema: ConversationResponse },
      ...problems(400, 403, 404),
    },
    run: getConversation,
  },
  {
    method: "GET",
    path: "/v1/workflows",
    operationId: "listWorkflows",
    summary:
      "The workflows the tenant may start: given to the stack (by name or alias), its own, the shared ones",
    auth: "jwt",
    feature: "runs",
    responses: {
      200: { description: "the workflows and their versions", schema: WorkflowListResponse },
      ...problems(403),
    },
    run: async ({ ports, who }) => listTenantWorkflows(who(), ports.workflows),
  },
  {
    method: "GET",
    path: "/v1/workflows/{workflow_name}",
    operationId: "getWorkflow",
    summary:
      "A workflow: what a start by its name runs (the definition, its input), or the version asked for; its scope and versions",
    auth: "jwt",
    feature: "runs",
    query: {
      version: {
        description: "the version to show (default: the newest, which a start runs)",
        schema: { type: "integer", minimum: 1 },
      },
    },
    responses: {
      200: { description: "the workflow", schema: WorkflowResponse },
      ...problems(400, 403, 404),
    },
    run: async ({ request, params, ports, who }) =>
      getTenantWorkflow(who(), params.workflow_name ?? "", versionParam(request), ports.workflows),
  },
  {
    method: "PUT",
    path: "/v1/workflows/{workflow_name}",
    operationId: "putWorkflow",
    summary:
      "Register a workflow definition for the tenant: checked, then stored as a new version (a version is written once)",
    auth: "jwt",
    feature: "runs",
    body: PutWorkflowBody,
    responses: {
      200: { description: "unchanged: this definition is registered", schema: WorkflowPutResponse },
      201: { description: "stored as a new version", schema: WorkflowPutResponse },
      ...problems(400, 403, 404, 409, 413, 415),
    },
    run: async ({ request, params, ports, who }) =>
      putTenantWorkflow(request, who(), params.workflow_name ?? "", ports.workflows),
  },
  {
    method: "POST",
    path: "/v1/workflows/{workflow_name}/runs",
    operationId: "startRun",
    summary:
      "Start a run of a workflow (the stack's, by name or alias; the tenant's own or shared); the body is its input",
    auth: "jwt",
    feature: "runs",
    body: StartRunBody,
    idempotent: true,
    responses: {
      202: { description: "accepted: the run to follow", schema: RunAcceptedResponse },
      ...problems(400, 403, 404, 409, 413, 415, 429, 503),
    },
    run: startRun,
  },
  {
    method: "GET",
    path: "/v1/runs",
    operationId: "listRuns",
    summary:
      "The tenant's runs, newest first, a page at a time, each as GET /v1/runs/{run_id} shows it",
    auth: "jwt",
    feature: "runs",
    query: {
      workflow: {
        description: "only the runs of this workflow (its name, or the alias a start gives)",
        schema: { type: "string" },
      },
      status: {
        description: "only the runs of this status",
        schema: { type: "string", enum: [...RUN_STATUSES] },
      },
      limit: {
        description: `the most runs on the page (default ${DEFAULT_RUN_PAGE}); a page may hold fewer (it also stops before 1 MB of runs) and still have a next_cursor`,
        schema: { type: "integer", minimum: 1, maximum: MAX_RUN_PAGE },
      },
      cursor: {
        description: "the next_cursor of the page before (of this tenant's list)",
        schema: { type: "string" },
      },
    },
    responses: {
      200: { description: "a page of runs", schema: RunListResponse },
      ...problems(400, 403, 404),
    },
    run: listRunsRoute,
  },
  {
    method: "GET",
    path: "/v1/runs/{run_id}",
    operationId: "getRun",
    summary:
      "A workflow run: its status, each node's state and output; a start the orchestrator refused, REJECTED and why",
    auth: "jwt",
    feature: "runs",
    responses: {
      200: { description: "the run", schema: RunResponse },
      ...problems(400, 403, 404),
    },
    run: getRun,
  },
  {
    method: "GET",
    path: "/v1/tasks/{task_id}",
    operationId: "getTask",
    summary: "A task: the steps it went through, in order (event types and times, no payloads)",
    auth: "jwt",
    responses: {
      200: { description: "the task", schema: TaskResponse },
      ...problems(400, 403, 404),
    },
    run: getTask,
  },
];

/** Where a service's routes are: each client route's, under its tenant. */
export const SERVICE_PREFIX = "/v1/tenants/{tenant_id}";

/** A service erases a customer of its tenant (./erasure): no client twin, no user acts. */
const ERASE_ROUTE: Route = {
  method: "POST",
  path: `${SERVICE_PREFIX}/customers/{customer_id}/erasure`,
  operationId: "serviceEraseCustomer",
  summary:
    "Erase a customer's personal data (a service, for a tenant): what is stored of them reads [erased]",
  auth: "iam",
  body: EraseCustomerBody,
  responses: {
    200: { description: "erased, now or before", schema: ErasureResponse },
    ...problems(400, 403, 404, 413, 415, 503),
  },
  run: async ({ request, params, ports, settings, who }) => {
    const caller = who();
    const customer = idParam(params, "customer_id");
    const body = request.body ? bodyOf(request, EraseCustomerBody, settings.maxBodyBytes) : {};
    return eraseForService(
      ports,
      { tenant: caller.tenantId, customer },
      request.principal ?? "",
      body.reason,
    );
  },
};

/**
 * Every route: the clients' (a JWT names the tenant and the user) and the same routes for
 * services (`/v1/tenants/{tenant_id}/...`, signed with AWS credentials: an IAM policy may allow a
 * service only its tenants' paths, and the tenant is the path's; no user acts).
 */
export const ROUTES: readonly Route[] = [
  ...CLIENT_ROUTES,
  ...CLIENT_ROUTES.filter((route) => route.auth === "jwt").map(
    (route): Route => ({
      ...route,
      path: route.path.replace(/^\/v1/, SERVICE_PREFIX),
      operationId: `service${route.operationId[0]?.toUpperCase()}${route.operationId.slice(1)}`,
      summary: `${route.summary} (a service, for a tenant)`,
      auth: "iam",
    }),
  ),
  ERASE_ROUTE,
];

/** Answer one request; never throws (an unexpected error is a 500 that says nothing inside). */
export async function handleRequest(
  request: HttpRequest,
  ports: FrontDoorPorts,
  settings: FrontDoorSettings = {},
): Promise<HttpResponse> {
  const resolved = {
    tenantClaim: settings.tenantClaim ?? "tenant_id",
    maxBodyBytes: settings.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    idempotencyHours: settings.idempotencyHours ?? DEFAULT_IDEMPOTENCY_HOURS,
    requestsPerMinute: settings.requestsPerMinute ?? DEFAULT_REQUESTS_PER_MINUTE,
    runsInFlight: settings.runsInFlight ?? DEFAULT_RUNS_IN_FLIGHT,
    tenantLimits: settings.tenantLimits ?? {},
    features: settings.features ?? ALL_FEATURES,
  };
  try {
    const { route, params } = routeOf(request);
    checkServed(route, resolved.features, request.path);
    const who = () =>
      route.auth === "iam"
        ? serviceCallerOf(params.tenant_id, request.principal)
        : callerOf(request.claims, resolved.tenantClaim, settings.serviceScope);
    const response = await route.run({ request, params, ports, settings: resolved, who });
    // HEAD is GET without the body (RFC 9110 §9.3.2).
    return request.method === "HEAD" ? { ...response, body: "" } : response;
  } catch (error) {
    if (error instanceof ProblemError) return problemResponse(error.problem, request.requestId);
    if (error instanceof AgentBusError && error.errorClass === "transient")
      return problemResponse(
        {
          code: "unavailable",
          detail:
            "AgentBus could not take the request now; send it again (with the same Idempotency-Key)",
          headers: { "retry-after": "1" },
        },
        request.requestId,
      );
    throw error;
  }
}

/**
 * The route a request names (a GET route serves HEAD too) and its path parameters: 404 when no
 * route has its path, 405 with `Allow` when none of them takes its method, 400 when a parameter
 * is not percent-encoded UTF-8.
 */
export function routeOf(request: HttpRequest): { route: Route; params: Record<string, string> } {
  const onPath = ROUTES.filter((route) => pathMatches(route.path, request.path));
  if (onPath.length === 0) fail("not_found", `no route ${request.path}`);
  const route = onPath.find((r) => methodsOf(r).includes(request.method));
  const allowed = onPath.flatMap(methodsOf);
  if (!route)
    fail("method_not_allowed", `${request.path} takes ${allowed.join(", ")}`, {
      headers: { allow: allowed.join(", ") },
    });
  return { route, params: matchPath(route.path, request.path) ?? {} };
}

/** The methods a route takes: its own, and HEAD with GET. */
export function methodsOf(route: Pick<Route, "method">): string[] {
  return route.method === "GET" ? ["GET", "HEAD"] : [route.method];
}

/** The query's `version`: absent, or a whole number at least 1 (else 400). */
export function versionParam(request: HttpRequest): number | undefined {
  const raw = request.query?.version;
  if (raw === undefined) return undefined;
  const version = Number(raw);
  if (/^\d{1,9}$/.test(raw) && version >= 1) return version;
  fail("invalid_request", `version ${JSON.stringify(raw)} is not a whole number, at least 1`, {
    errors: [{ path: "(query).version", message: "must be a whole number, at least 1" }],
  });
}

export function idParam(params: Readonly<Record<string, string>>, name: string): string {
  const value = params[name] ?? "";
  const parsed = OpaqueId.safeParse(value);
  if (!parsed.success)
    fail("invalid_request", `${name} ${JSON.stringify(value)} is not an id`, {
      errors: z.issueLines(parsed.error, name).map((line) => issue(line, name)),
    });
  return value;
}

/**
 * The view of the conversation the caller's `conversationId` names, when it is the caller's to
 * see or to write to: its tenant's (schemas/ids.ts `tenantConversationId`), and its customer's
 * (`customer`: a user's own, or the customer a message is from; none for a service that reads,
 * which reads any of its tenant's). Another tenant's or another customer's answers 404, as one
 * that does not exist, so a guessed id tells nothing; a service's message for another customer
 * than the conversation's is refused (403), as the conversation would refuse it. Undefined while
 * the conversation has no view yet.
 */
export async function conversationOf(
  ports: Pick<FrontDoorPorts, "store">,
  caller: Caller,
  conversationId: string,
  customer = readingCustomerOf(caller),
): Promise<ConversationView | undefined> {
  const id = tenantConversationId(caller.tenantId, conversationId);
  const loaded = await ports.store.load({ state: { type: CONVERSATION_VIEW, id } });
  const view = loaded.state?.data as ConversationView | undefined;
  if (view && tenantOf(view) !== caller.tenantId)
    fail("not_found", `no conversation ${conversationId}`);
  if (customer === undefined) return view;
  if (await isCustomersConversation(ports, caller.tenantId, id, customer, view !== undefined))
    return view;
  if (caller.service)
    fail(
      "forbidden",
      `conversation ${conversationId} is not customer ${customer}'s: a conversation takes the messages of the customer whose first message opened it`,
    );
  fail("not_found", `no conversation ${conversationId}`);
}

/**
 * Whether `caller` may read the conversation keyed `key` (its tenant's), which has a view: a
 * service any of its tenant's, a user only their own customer's.
 */
export async function mayReadConversation(
  ports: Pick<FrontDoorPorts, "store">,
  caller: Caller,
  key: string,
): Promise<boolean> {
  const customer = readingCustomerOf(caller);
  return (
    customer === undefined ||
    (await isCustomersConversation(ports, caller.tenantId, key, customer, true))
  );
}

/** The customer a caller reads conversations as: a user's own; none for a service. */
function readingCustomerOf(caller: Caller): string | undefined {
  return caller.service === undefined && caller.userId !== undefined
    ? ownCustomerOf(caller.userId)
    : undefined;
}

/**
 * Whether the conversation keyed `id` (its tenant's key) is `customer`'s. A conversation is the
 * customer's of its first message, as the conversation's state records it: the conversation role
 * refuses any other customer's message for good (`conversation.customer_mismatch`), and its view
 * does not say whose it is. With no state yet, the conversation is nobody's and its first message
 * may be anyone's; but one with a view (`viewed`) and no state names no customer, so it is
 * nobody's to read.
 */
async function isCustomersConversation(
  ports: Pick<FrontDoorPorts, "store">,
  tenant: string,
  id: string,
  customer: string,
  viewed: boolean,
): Promise<boolean> {
  const loaded = await ports.store.load({ state: { type: CONVERSATION_AGGREGATE, id } });
  const state = loaded.state?.data as ConversationState | null | undefined;
  if (!state) return !viewed;
  return tenantOf(state) === tenant && state.customer_id === customer;
}

async function postMessage({ request, params, ports, settings, who }: RouteContext) {
  const caller = who();
  const conversationId = idParam(params, "conversation_id");
  checkIdempotencyKey(request);
  const body = bodyOf(request, PostMessageBody, settings.maxBodyBytes);
  refuseSealedLookalikes(ports.registry, "conversation.message.received", body);
  const customer = customerOf(caller, body.customer_id);
  // Before anything is counted, claimed or put: another customer's message would be refused by
  // the conversation for good, after a 202.
  await conversationOf(ports, caller, conversationId, customer);
  const key = tenantConversationId(caller.tenantId, conversationId);
  if (caller.service && body.customer_id !== undefined)
    ports.log?.info("a service acts for a customer", {
      tenant_id: caller.tenantId,
      caller: caller.service,
      customer_id: customer,
      conversation_id: conversationId,
    });
  await takeRequest(ports, settings, caller, "conversations");
  const message = {
    text: body.text,
    customer_id: customer,
    ...(body.channel === undefined ? {} : { channel: body.channel }),
  };
  const claimed = await claimSequence({ request, ports }, caller, key, message, body.client_seq);
  const envelope = clientEnvelope(ports, caller, claimed.eventId, {
    type: "conversation.message.received",
    traceparent: header(request, "traceparent"),
    aggregate: { type: "conversation", id: key },
    conversationId: key,
    payload: { ...message, ...(claimed.seq === undefined ? {} : { client_seq: claimed.seq }) },
  });
  return accept({ request, ports, settings }, caller, envelope, body, {
    event_id: envelope.event_id,
    task_id: envelope.task_id,
    correlation_id: envelope.correlation_id,
    conversation_id: conversationId,
    ...(claimed.seq === undefined ? {} : { client_seq: claimed.seq }),
    links: { conversation: `/v1/conversations/${conversationId}` },
  });
}

/**
 * The message's place in its conversation (./client-seq.ts): the one sent, or the next one; a
 * repeat gets the event id it was first put on the bus under. A request whose Idempotency-Key was
 * accepted before claims nothing (its stored envelope, with its sequence, is put again), so a
 * retry never takes a second number.
 */
async function claimSequence(
  { request, ports }: Pick<RouteContext, "request" | "ports">,
  caller: Caller,
  conversation: string,
  message: Record<string, unknown>,
  seq: number | undefined,
): Promise<{ readonly eventId: string; readonly seq?: number }> {
  const eventId = ports.ids.next();
  const record = header(request, "idempotency-key");
  if (record !== undefined && (await ports.accepted.find(acceptedKey(caller, record))))
    return { eventId };
  const messageSha = sha256(JSON.stringify(message)).slice(0, 16);
  return claimOrRefuse(ports.sequences, conversation, {
    ...(seq === undefined ? {} : { seq }),
    messageSha,
    eventId,
  });
}

/**
 * The message's customer: the user's own (`cust_<user token>`); a service's names it (required of
 * one signing with AWS credentials). A user naming another customer is refused (403).
 */
function customerOf(caller: Caller, named: string | undefined): string {
  if (caller.userId === undefined) {
    if (named !== undefined) return named;
    fail("invalid_request", "a service names the customer the message is from: customer_id", {
      errors: [
        { path: "(body).customer_id", message: "required when a service sends the message" },
      ],
    });
  }
  const own = ownCustomerOf(caller.userId);
  if (named === undefined || named === own || caller.service) return named ?? own;
  fail(
    "forbidden",
    `customer_id ${JSON.stringify(named)} is not the token's user: only a service names the customer a message is from`,
  );
}

/**
 * A client's message as the front door puts it on the bus: unsequenced (version 0) on
 * `aggregate`, the event id given and the task and correlation named after it, the order key the
 * aggregate's id, the caller's tenant and user, the type's newest schema version, and the trace it
 * starts: the caller's W3C `traceparent` header continued when it is a valid one, else a new trace
 * (functions/core/trace-context.ts).
 */
export function clientEnvelope(
  ports: Pick<FrontDoorPorts, "registry" | "clock">,
  caller: Caller,
  eventId: string,
  message: {
    readonly type: string;
    readonly aggregate: { readonly type: string; readonly id: string };
    readonly conversationId?: string;
    readonly traceparent?: string;
    readonly payload: unknown;
  },
): Envelope {
  const parsed = ports.registry.parse({
    event_id: eventId,
    event_type: message.type,
    schema_version: ports.registry.find(message.type)?.schemaVersion ?? 1,
    occurred_at: ports.clock.now().toISOString(),
    correlation_id: `corr_${eventId}`,
    causation_id: null,
    task_id: `task_${eventId}`,
    ...(message.conversationId === undefined ? {} : { conversation_id: message.conversationId }),
    tenant_id: caller.tenantId,
    ...(caller.userId === undefined ? {} : { user_id: caller.userId }),
    aggregate: { ...message.aggregate, version: 0 },
    order_key: message.aggregate.id,
    traceparent: startTraceparent(eventId, message.traceparent),
    producer: "front-door",
    payload: message.payload,
  });
  if (!parsed.ok)
    throw new Error(`the front door built an invalid ${message.type}: ${parsed.message}`);
  return parsed.envelope;
}

/**
 * 400 for a personal field of a client's `type` that begins as a sealed field does
 * (`sealed:v1:`), checked before anything is counted or claimed: the vault leaves such a value as
 * it is, taking it for sealed, so it would travel unsealed and then fail every consumer that
 * opens it. A client's text never needs the prefix.
 */
function refuseSealedLookalikes(
  registry: EventRegistry,
  type: string,
  payload: Readonly<Record<string, unknown>>,
): void {
  for (const field of registry.find(type)?.personal ?? [])
    if (isSealed(payload[field]))
      fail(
        "invalid_request",
        `${field} may not begin with "${SEALED_PREFIX}", which marks a sealed field`,
        {
          errors: [{ path: field, message: `may not begin with "${SEALED_PREFIX}"` }],
        },
      );
}

/**
 * Put an accepted envelope on its topic's bus and answer 202 with `answer`; with an
 * Idempotency-Key, the stored envelope and answer of the key's first request instead (see top).
 * A run's start (`run`) is first counted against its tenant's cap (./runs-in-flight): over it,
 * 429 and nothing written, unless the key's first request was accepted (the same run).
 */
async function accept(
  context: Pick<RouteContext, "request" | "ports" | "settings">,
  caller: Caller,
  plain: Envelope,
  body: unknown,
  answer: Record<string, unknown>,
  run?: CountedRun,
): Promise<HttpResponse> {
  const { request, ports } = context;
  // Sealed before it is kept or put on the bus: no copy of the words is left in the clear.
  const accepted = ports.sealer ? await ports.sealer.seal(plain) : plain;
  const record = acceptedRecord(request, caller, accepted, body, answer, ports.clock.now());
  const counted = run !== undefined && (await countAccepted(context, caller, run, record));
  const release = async () => {
    if (counted) await ports.runs.remove(caller.tenantId, [run]);
  };
  let stored: AcceptedRequest | undefined;
  try {
    stored = record && (await remember(context, record));
  } catch (error) {
    // Refused (409: the key's first request was another): nothing of this request is kept, so
    // its run never starts. A release that fails leaves it counted until it counts as lost.
    if (error instanceof ProblemError) await release().catch(() => undefined);
    throw error;
  }
  const envelope = stored?.envelope ?? accepted;
  // The key's first request started its own run, counted then: this request's count goes.
  if (envelope.event_id !== accepted.event_id) await release();
  try {
    await publish(ports, envelope);
  } catch (error) {
    // Without a key no retry can put this run again; with one, a retry puts the counted run. A
    // release that fails leaves the run counted until it counts as lost (UNSTARTED_RUN_SECONDS).
    if (!record) await release().catch(() => undefined);
    throw error;
  }
  const response = stored?.response ?? answer;
  const links = response.links as Record<string, string>;
  return json(202, response, { location: Object.values(links)[0] ?? "" });
}

/**
 * The stored key of a request's Idempotency-Key: the caller's, hashed under its tenant. A user's
 * key is their own (hashed with their user id), so another user of the tenant sending the same
 * key sends another request. A service signing with AWS credentials has no user: its keys are
 * its tenant's, since a retry may come signed by another session of the same role.
 */
function acceptedKey(caller: Caller, idempotencyKey: string): string {
  const scoped =
    caller.userId === undefined ? idempotencyKey : `${caller.userId}\n${idempotencyKey}`;
  return `${caller.tenantId}#${sha256(scoped)}`;
}

/** What is kept of a request sent with an Idempotency-Key (./accepted); none without one. */
function acceptedRecord(
  request: HttpRequest,
  caller: Caller,
  envelope: Envelope,
  body: unknown,
  response: Record<string, unknown>,
  now: Date,
): AcceptedRequest | undefined {
  const key = header(request, "idempotency-key");
  if (key === undefined) return undefined;
  return {
    key: acceptedKey(caller, key),
    request_sha256: sha256(`${request.method} ${request.path}\n${JSON.stringify(body)}`),
    envelope,
    response,
    accepted_at: now.toISOString(),
  };
}

/**
 * Count a run's start against its tenant's cap (./admission.ts): true when counted; false when
 * the tenant is at its cap but the request's key was accepted before (a retry: its run was
 * counted then); else 429 with `Retry-After`.
 */
async function countAccepted(
  { ports, settings }: Pick<RouteContext, "ports" | "settings">,
  caller: Caller,
  run: CountedRun,
  record: AcceptedRequest | undefined,
): Promise<boolean> {
  const refused = await countRun(ports, settings, caller, run);
  if (!refused) return true;
  if (record && (await ports.accepted.find(record.key))) return false;
  return refused.refuse();
}

/** Keep `record` unless its key's first request is kept; that one (409 for another request). */
async function remember(
  { request, ports, settings }: Pick<RouteContext, "request" | "ports" | "settings">,
  record: AcceptedRequest,
): Promise<AcceptedRequest> {
  const expires = new Date(
    Date.parse(record.accepted_at) + settings.idempotencyHours * 3600 * 1000,
  );
  const stored = await ports.accepted.putIfAbsent(record, expires);
  if (stored.request_sha256 !== record.request_sha256)
    fail(
      "idempotency_key_reused",
      `Idempotency-Key ${JSON.stringify(header(request, "idempotency-key"))} was used at ${stored.accepted_at} for another request`,
    );
  return stored;
}

/** Put `envelope` on its topic's bus; 503 when the bus did not take it. */
async function publish(ports: FrontDoorPorts, envelope: Envelope): Promise<void> {
  const topic = ports.registry.find(envelope.event_type)?.topic ?? "events";
  const failures = await ports.publisher.publish(topic, [envelope]);
  if (failures.length > 0)
    fail(
      "unavailable",
      `the request was not put on the bus (${failures[0]?.code}); send it again`,
      {
        headers: { "retry-after": "1" },
      },
    );
}

/** The Idempotency-Key header, checked (400 when it is not 1-255 printable characters). */
function checkIdempotencyKey(request: HttpRequest): void {
  const key = header(request, "idempotency-key");
  if (key !== undefined && !IDEMPOTENCY_KEY.test(key))
    fail("invalid_request", "Idempotency-Key must be 1-255 printable ASCII characters");
}

async function startRun({ request, params, ports, settings, who }: RouteContext) {
  const caller = who();
  const name = params.workflow_name ?? "";
  const { definition } = await tenantWorkflow(ports.workflows, caller.tenantId, name);
  checkIdempotencyKey(request);
  const body = bodyOf(request, StartRunBody, settings.maxBodyBytes);
  checkRunInput(definition, body);
  await takeRequest(ports, settings, caller, "runs");
  const eventId = ports.ids.next();
  const runId = `run_${eventId}`;
  const envelope = clientEnvelope(ports, caller, eventId, {
    type: "workflow.start.requested",
    traceparent: header(request, "traceparent"),
    aggregate: { type: DAG_RUN, id: runId },
    payload: { run_id: runId, workflow_name: name, request: body },
  });
  const answer = {
    event_id: envelope.event_id,
    run_id: runId,
    task_id: envelope.task_id,
    correlation_id: envelope.correlation_id,
    links: { run: `/v1/runs/${runId}` },
  };
  return accept({ request, ports, settings }, caller, envelope, body, answer, {
    runId,
    since: envelope.occurred_at,
  });
}

async function getTask({ params, ports, who }: RouteContext) {
  const caller = who();
  const taskId = idParam(params, "task_id");
  const events = await ports.tasks.eventsByTask(taskId);
  // A task is the tenant's its events name (the default tenant's name none: the AWS CLI's, those
  // from before tenants); one that names two is nobody's.
  const named = new Set(events.flatMap((e) => (e.tenant_id ? [e.tenant_id] : [])));
  const owner = named.size === 0 ? DEFAULT_TENANT : named.size === 1 ? [...named][0] : undefined;
  if (events.length === 0 || owner !== caller.tenantId) fail("not_found", `no task ${taskId}`);
  return json(200, {
    task_id: taskId,
    events: events.map((e) => ({
      event_id: e.event_id,
      event_type: e.event_type,
      occurred_at: e.occurred_at,
      producer: e.producer,
      aggregate: e.aggregate,
    })),
  });
}

async function getRun({ params, ports, who }: RouteContext) {
  const caller = who();
  const runId = idParam(params, "run_id");
  const { store, runEvents } = ports;
  const run = await loadStoredRun({ store, streams: runEvents }, runId, caller.tenantId);
  if (run.kind === "unstored" || run.kind === "not_found") fail("not_found", `no run ${runId}`);
  return json(200, storedRunAnswer(runId, run));
}

/** A page of the caller's runs (./run-list.ts), each as `GET /v1/runs/{id}` shows it. */
async function listRunsRoute({ request, ports, who }: RouteContext) {
  const caller = who();
  const { runIndex, states } = ports;
  if (!runIndex) fail("not_served", "this deployment's front door lists no runs");
  const query = runListQueryOf(request.query ?? {}, caller.tenantId, ports.workflows);
  const listed = (run: ListedRun) => ({
    ...runAnswer(run.runId, run.state),
    listed_at: run.listedAt,
  });
  const page = await listRuns({ runIndex, states }, caller.tenantId, query, listed);
  return json(200, {
    runs: page.runs,
    ...(page.next ? { next_cursor: runCursor(caller.tenantId, page.next) } : {}),
  });
}

/** The status of a run whose start the orchestrator refused (./stored-run.ts): it never ran. */
export const REFUSED_RUN_STATUS = "REJECTED";

/**
 * What `GET /v1/runs/{id}` and its stream show of a stored run: the run (`runAnswer`), or a
 * refused start, which has no workflow pinned and no nodes, and says why in `error`.
 */
export function storedRunAnswer(
  runId: string,
  run: Extract<StoredRun, { kind: "run" | "refused" }>,
): ReturnType<typeof runAnswer> | RefusedRunAnswer {
  if (run.kind === "run") return runAnswer(runId, run.state);
  const { code, message } = run.refusal;
  return { run_id: runId, status: REFUSED_RUN_STATUS, nodes: {}, error: { code, message } };
}

/** A refused start as `GET /v1/runs/{id}` shows it. */
export interface RefusedRunAnswer {
  readonly run_id: string;
  readonly status: typeof REFUSED_RUN_STATUS;
  readonly nodes: Record<string, never>;
  readonly error: StartRefusal;
}

/** A run as `GET /v1/runs/{id}` and its stream show it: its status, each node's state and output. */
export function runAnswer(runId: string, state: OrchestratorState) {
  const { run } = state;
  return {
    run_id: runId,
    workflow: run.workflow,
    status: run.status,
    nodes: Object.fromEntries(
      Object.entries(run.nodes).map(([id, node]) => [
        id,
        {
          state: node.state,
          ...(node.output === undefined ? {} : { output: node.output }),
          ...(node.error ? { error: { code: node.error.code, message: node.error.message } } : {}),
        },
      ]),
    ),
  };
}

async function getConversation({ params, ports, who }: RouteContext) {
  const caller = who();
  const conversationId = idParam(params, "conversation_id");
  const view = await conversationOf(ports, caller, conversationId);
  if (!view) fail("not_found", `no conversation ${conversationId}`);
  return json(200, {
    conversation_id: conversationId,
    version: view.version,
    turns: turnsOf(view),
  });
}

/**
 * A conversation's turns, oldest first, as its customer sees them: a reply held for a person's
 * review is not theirs until a person approves it (a draft the output guard refused, one the model
 * asked a review for), so a held turn shows no `reply_text` until then, and no turn shows why it
 * was held (`held_reason`, the operators').
 */
export function turnsOf(view: ConversationView): ConversationTurn[] {
  return view.turn_order.flatMap((id) => {
    const turn = view.turns[id];
    if (!turn) return [];
    const { held_reason, reply_text, ...shown } = turn;
    const released =
      held_reason === undefined || (turn.reviewed_by !== undefined && turn.status !== "rejected");
    return [released && reply_text !== undefined ? { ...shown, reply_text } : shown];
  });
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
