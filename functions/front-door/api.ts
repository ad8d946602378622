import { createHash } from "node:crypto";
import { type Envelope, type EventRegistry, tenantOf } from "../../schemas";
import { OpaqueId } from "../../schemas/ids";
import * as z from "../../schemas/zod";
import { AgentBusError } from "../core/errors";
import type { Clock, EventPublisher, EventStore, IdSource } from "../core/ports";
import type { ConversationView } from "../roles/customer-support/conversation-projection/conversation-projection";
import type { AcceptedRequest, AcceptedRequests } from "./accepted";
import {
  ConversationResponse,
  MessageAcceptedResponse,
  PostMessageBody,
  ProblemResponse,
} from "./contract";
import {
  fail,
  type HttpRequest,
  type HttpResponse,
  header,
  json,
  ProblemError,
  problemResponse,
} from "./http";
import { type Caller, callerOf } from "./identity";
import openapi from "./openapi.json";

/**
 * The front door (seed 000 §10: 用户 -> 会话 API -> 任务状态库 + Outbox): the HTTP API clients use
 * instead of signing AWS requests, versioned under `/v1`. Each route checks the caller (./identity),
 * validates what it is sent (400 with every issue), and either puts one accepted event on its
 * topic's bus or reads a projection, answering only for the caller's tenant: another tenant's id
 * answers 404, the same as an id that does not exist.
 *
 * Posting a message: the body (at most `maxBodyBytes`, JSON) becomes a
 * `conversation.message.received` (unsequenced, aggregate `conversation/<id>`, a new task) with
 * the caller's tenant and user; 202 gives the ids to follow. With an `Idempotency-Key`, the
 * envelope and the answer are stored first (./accepted) and every retry puts that same envelope
 * again and gives the same answer; the same key with another request is refused (409).
 */

export interface FrontDoorPorts {
  readonly publisher: EventPublisher;
  /** The projections the reads answer from (state items only). */
  readonly store: Pick<EventStore, "load">;
  readonly accepted: AcceptedRequests;
  readonly registry: EventRegistry;
  readonly ids: IdSource;
  readonly clock: Clock;
}

export interface FrontDoorSettings {
  /** The token claim that names the tenant. @default "tenant_id" */
  readonly tenantClaim?: string;
  /** Largest body taken, in bytes. @default 16 KiB */
  readonly maxBodyBytes?: number;
  /** How long a key's request is remembered. @default 24 hours */
  readonly idempotencyHours?: number;
}

export const DEFAULT_MAX_BODY_BYTES = 16 * 1024;
export const DEFAULT_IDEMPOTENCY_HOURS = 24;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
export const CONVERSATION_VIEW = "conversation_view";

interface RouteContext {
  readonly request: HttpRequest;
  readonly params: Readonly<Record<string, string>>;
  readonly ports: FrontDoorPorts;
  readonly settings: Required<FrontDoorSettings>;
}

/** A route: what it serves, what it takes and gives (the OpenAPI document is made from these). */
export interface Route {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  /** Whether a verified token is needed. */
  readonly auth: boolean;
  readonly body?: z.core.$ZodType;
  readonly idempotent?: boolean;
  readonly responses: Readonly<Record<number, { description: string; schema?: z.core.$ZodType }>>;
  run(context: RouteContext): Promise<HttpResponse>;
}

const problems = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [status, { description: "a problem", schema: ProblemResponse }]),
  );

export const ROUTES: readonly Route[] = [
  {
    method: "GET",
    path: "/v1/openapi.json",
    operationId: "getOpenApi",
    summary: "This API's OpenAPI document",
    auth: false,
    responses: { 200: { description: "the OpenAPI 3.1 document" } },
    run: async () => json(200, openapi),
  },
  {
    method: "POST",
    path: "/v1/conversations/{conversation_id}/messages",
    operationId: "postMessage",
    summary: "Send a customer's message; the reply follows on the conversation",
    auth: true,
    body: PostMessageBody,
    idempotent: true,
    responses: {
      202: { description: "accepted: the ids to follow", schema: MessageAcceptedResponse },
      ...problems(400, 401, 403, 404, 409, 413, 415, 503),
    },
    run: postMessage,
  },
  {
    method: "GET",
    path: "/v1/conversations/{conversation_id}",
    operationId: "getConversation",
    summary: "A conversation: its turns, their status and replies",
    auth: true,
    responses: {
      200: { description: "the conversation", schema: ConversationResponse },
      ...problems(400, 401, 403, 404),
    },
    run: getConversation,
  },
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
  };
  try {
    const { route, params } = routeOf(request);
    return await route.run({ request, params, ports, settings: resolved });
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

/** The route a request names and its path parameters (404 or 405 when none). */
export function routeOf(request: HttpRequest): { route: Route; params: Record<string, string> } {
  const matching = ROUTES.flatMap((route) => {
    const params = matchPath(route.path, request.path);
    return params ? [{ route, params }] : [];
  });
  if (matching.length === 0) fail("not_found", `no route ${request.path}`);
  const found = matching.find((m) => m.route.method === request.method);
  if (!found)
    fail(
      "method_not_allowed",
      `${request.path} takes ${matching.map((m) => m.route.method).join(", ")}`,
      {
        headers: { allow: matching.map((m) => m.route.method).join(", ") },
      },
    );
  return found;
}

function matchPath(template: string, path: string): Record<string, string> | undefined {
  const want = template.split("/");
  const got = path.split("/");
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const segment = want[i] ?? "";
    const value = got[i] ?? "";
    if (segment.startsWith("{")) {
      if (value === "") return undefined;
      params[segment.slice(1, -1)] = decodeURIComponent(value);
    } else if (segment !== value) return undefined;
  }
  return params;
}

function idParam(params: Readonly<Record<string, string>>, name: string): string {
  const value = params[name] ?? "";
  const parsed = OpaqueId.safeParse(value);
  if (!parsed.success)
    fail("invalid_request", `${name} ${JSON.stringify(value)} is not an id`, {
      errors: z.issueLines(parsed.error, name).map((line) => issue(line, name)),
    });
  return value;
}

function issue(line: string, root: string): { path: string; message: string } {
  const at = line.indexOf(": ");
  return at < 0
    ? { path: root, message: line }
    : { path: line.slice(0, at), message: line.slice(at + 2) };
}

/** The body as JSON of `schema`: 415, 413, 400 (not JSON), or 400 with every issue. */
function bodyOf<T>(request: HttpRequest, schema: z.ZodMiniType<T>, maxBytes: number): T {
  const type = header(request, "content-type") ?? "";
  if (!/^application\/json\b/i.test(type))
    fail(
      "unsupported_media_type",
      `send the body as application/json (got ${type || "no content type"})`,
    );
  const text = request.isBase64Encoded
    ? Buffer.from(request.body ?? "", "base64").toString("utf8")
    : (request.body ?? "");
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > maxBytes)
    fail("payload_too_large", `the body is ${bytes} bytes; at most ${maxBytes} are taken`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    fail("invalid_json", `the body is not JSON: ${(error as Error).message}`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    fail("invalid_request", "the body does not fit", {
      errors: z.issueLines(parsed.error, "(body)").map((line) => issue(line, "(body)")),
    });
  return parsed.data;
}

/** The conversation's view when it is the caller's tenant's; 404 when it is another's. */
async function conversationOf(
  ports: FrontDoorPorts,
  caller: Caller,
  conversationId: string,
): Promise<ConversationView | undefined> {
  const loaded = await ports.store.load({ state: { type: CONVERSATION_VIEW, id: conversationId } });
  const view = loaded.state?.data as ConversationView | undefined;
  if (view && tenantOf(view) !== caller.tenantId)
    fail("not_found", `no conversation ${conversationId}`);
  return view;
}

async function postMessage({ request, params, ports, settings }: RouteContext) {
  const caller = callerOf(request.claims, settings.tenantClaim);
  const conversationId = idParam(params, "conversation_id");
  const key = header(request, "idempotency-key");
  if (key !== undefined && !IDEMPOTENCY_KEY.test(key))
    fail("invalid_request", "Idempotency-Key must be 1-255 printable ASCII characters");
  const body = bodyOf(request, PostMessageBody, settings.maxBodyBytes);
  await conversationOf(ports, caller, conversationId);
  const now = ports.clock.now();
  const eventId = ports.ids.next();
  const taskId = `task_${eventId}`;
  const parsed = ports.registry.parse({
    event_id: eventId,
    event_type: "conversation.message.received",
    schema_version: 1,
    occurred_at: now.toISOString(),
    correlation_id: `corr_${eventId}`,
    causation_id: null,
    task_id: taskId,
    conversation_id: conversationId,
    tenant_id: caller.tenantId,
    user_id: caller.userId,
    aggregate: { type: "conversation", id: conversationId, version: 0 },
    order_key: conversationId,
    producer: "front-door",
    payload: {
      text: body.text,
      customer_id: body.customer_id ?? `cust_${caller.userId.slice("user_".length)}`,
      ...(body.channel === undefined ? {} : { channel: body.channel }),
    },
  });
  if (!parsed.ok) throw new Error(`the front door built an invalid message: ${parsed.message}`);
  let envelope: Envelope = parsed.envelope;
  let answer: Record<string, unknown> = {
    event_id: eventId,
    task_id: taskId,
    correlation_id: envelope.correlation_id,
    conversation_id: conversationId,
    links: { conversation: `/v1/conversations/${conversationId}` },
  };
  if (key !== undefined) {
    const record: AcceptedRequest = {
      key: `${caller.tenantId}#${sha256(key)}`,
      request_sha256: sha256(`${request.method} ${request.path}\n${JSON.stringify(body)}`),
      envelope,
      response: answer,
      accepted_at: now.toISOString(),
    };
    const expires = new Date(now.getTime() + settings.idempotencyHours * 3600 * 1000);
    const stored = await ports.accepted.putIfAbsent(record, expires);
    if (stored.request_sha256 !== record.request_sha256)
      fail(
        "idempotency_key_reused",
        `Idempotency-Key ${JSON.stringify(key)} was used at ${stored.accepted_at} for another request`,
      );
    envelope = stored.envelope;
    answer = { ...stored.response };
  }
  const topic = ports.registry.find(envelope.event_type)?.topic ?? "events";
  const failures = await ports.publisher.publish(topic, [envelope]);
  if (failures.length > 0)
    fail(
      "unavailable",
      `the message was not put on the bus (${failures[0]?.code}); send it again`,
      {
        headers: { "retry-after": "1" },
      },
    );
  return json(202, answer, {
    location: String((answer.links as { conversation: string }).conversation),
  });
}

async function getConversation({ request, params, ports, settings }: RouteContext) {
  const caller = callerOf(request.claims, settings.tenantClaim);
  const conversationId = idParam(params, "conversation_id");
  const view = await conversationOf(ports, caller, conversationId);
  if (!view) fail("not_found", `no conversation ${conversationId}`);
  return json(200, {
    conversation_id: view.conversation_id,
    version: view.version,
    turns: view.turn_order.flatMap((id) => (view.turns[id] ? [view.turns[id]] : [])),
  });
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
