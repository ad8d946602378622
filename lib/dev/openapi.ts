import { jsonSchemaOf } from "../../functions/core/model-schema-export";
import { ROUTES, type Route } from "../../functions/front-door/api";
import { ProblemResponse, PutWorkflowBody } from "../../functions/front-door/contract";
import { FEATURE_EXTENSION } from "../../functions/front-door/served";
import { STREAM_ROUTES, type StreamRoute } from "../../functions/front-door/stream";
import { FEATURES } from "../../functions/roles/features";

/**
 * The front door's OpenAPI 3.1 document, made from its routes (functions/front-door/api.ts) and
 * their zod schemas. `npm run schemas` writes it to functions/front-door/openapi.json, which the
 * API serves at `/v1/openapi.json` (the function carries no JSON Schema converter); a test checks
 * the file is current and valid, and the e2e tests check every error answered against it.
 *
 * Every error is the function's problem details (`Problem`), but for what API Gateway answers
 * itself, `{"message": ...}` as `application/json` (`GatewayMessage`): an HTTP API's own answers
 * cannot be customized. Each route's document lists both where both may come.
 */

const PROBLEM = { $ref: "#/components/schemas/Problem" };

/** Bodies written once under components (a workflow definition is large, and two routes take it). */
const BODY_COMPONENTS = new Map<unknown, string>([[PutWorkflowBody, "WorkflowDefinition"]]);
const GATEWAY_MESSAGE = { $ref: "#/components/schemas/GatewayMessage" };

/** When API Gateway answers a route's request itself, by status. */
const GATEWAY_ANSWERS: Readonly<Record<number, (route: Route) => string | undefined>> = {
  401: (route) =>
    route.auth === "jwt"
      ? "its JWT authorizer refused the token (missing, expired, not the issuer's: `WWW-Authenticate` says which)"
      : undefined,
  403: (route) =>
    route.auth === "iam"
      ? "the request is not signed, or not by credentials whose policy allows its path"
      : undefined,
  413: (route) => (route.body ? "the body is over API Gateway's 10 MB" : undefined),
  429: () => "the stage is over its throttle (requests a second across the API)",
  500: () => "the function could not be run",
  503: () => "the function did not answer in time",
};
export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of ROUTES)
    paths[route.path] = { ...paths[route.path], [route.method.toLowerCase()]: operationOf(route) };
  for (const route of STREAM_ROUTES)
    paths[route.path] = {
      // A deployed stack serves the streams from their own URL (HTTP APIs cannot stream).
      servers: [
        {
          url: "/",
          description:
            "the stack's FrontDoorStreamUrl output (a Lambda function URL); locally, the API's own base URL",
        },
      ],
      get: streamOperationOf(route),
    };
  return {
    openapi: "3.1.0",
    info: {
      title: "AgentBus",
      version: "1",
      description: `The front door of AgentBus: send a customer's message, follow its conversation, register and read a tenant's workflows, start and follow a workflow run. Clients send a bearer JWT whose claims name the tenant and the user; services sign their requests with AWS credentials and call the same routes under /v1/tenants/{tenant_id}. This document takes neither. Every GET answers HEAD alike, without the body. Errors are problem details (application/problem+json, the Problem schema): a path no operation has answers 404, and a method its path does not take 405 with Allow. Only what API Gateway answers itself is its own JSON (application/json, the GatewayMessage schema): a refused token (401) or signature (403), a body over 10 MB (413), its throttle (429), a function that could not run (500) or did not answer in time (503). ${featuresNote()}`,
    },
    // Relative: the document is served by the API it describes (`<base URL>/openapi.json`).
    servers: [{ url: "/", description: "the API that serves this document" }],
    components: {
      schemas: {
        Problem: jsonSchemaOf(ProblemResponse),
        ...Object.fromEntries(
          [...BODY_COMPONENTS].map(([schema, name]) => [
            name,
            jsonSchemaOf(schema as Parameters<typeof jsonSchemaOf>[0]),
          ]),
        ),
        GatewayMessage: {
          type: "object",
          description: "What API Gateway answers itself (its answers cannot be customized)",
          properties: { message: { type: "string" } },
          required: ["message"],
        },
      },
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        sigv4: {
          type: "apiKey",
          name: "Authorization",
          in: "header",
          description:
            "A service's request signed with AWS credentials (Signature Version 4, service execute-api); its IAM policy names the tenants it may call for.",
          "x-amazon-apigateway-authtype": "awsSigv4",
        },
      },
    },
    paths,
  };
}

/** What the document says of the operations marked with a feature (functions/roles/features.ts). */
function featuresNote(): string {
  const named = new Set(
    [...ROUTES, ...STREAM_ROUTES].flatMap((r) => (r.feature ? [r.feature] : [])),
  );
  const which = [...named].map((f) => `${f}, where a role takes ${FEATURES[f].takes}`);
  return `An operation marked ${FEATURE_EXTENSION} is served only by a deployment that has the feature (${which.join("; ")}): elsewhere it answers 404 with the code not_served, and the document that deployment serves leaves it out.`;
}

/** One route as an OpenAPI operation: its parameters, body and answers. */
function operationOf(route: Route): Record<string, unknown> {
  const pathParams = [...route.path.matchAll(/\{([a-z_]+)\}/g)].map((m) => ({
    name: m[1],
    in: "path",
    required: true,
    schema: { type: "string" },
  }));
  const idempotency = route.idempotent
    ? [
        {
          name: "Idempotency-Key",
          in: "header",
          required: false,
          description:
            "Any 1-255 printable characters; a retry with the same key is the same request and gets the same answer (kept 24 hours).",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
      ]
    : [];
  const query = Object.entries(route.query ?? {}).map(([name, { description, schema }]) => ({
    name,
    in: "query",
    required: false,
    description,
    schema,
  }));
  const parameters = [...pathParams, ...query, ...idempotency];
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.feature ? { [FEATURE_EXTENSION]: route.feature } : {}),
    security: route.auth === "none" ? [] : [{ [route.auth === "iam" ? "sigv4" : "bearer"]: [] }],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body
      ? {
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: BODY_COMPONENTS.has(route.body)
                  ? { $ref: `#/components/schemas/${BODY_COMPONENTS.get(route.body)}` }
                  : jsonSchemaOf(route.body),
              },
            },
          },
        }
      : {}),
    responses: responsesOf(route),
  };
}

/** A route's answers: the function's (with its 500) and, where it answers itself, API Gateway's. */
function responsesOf(route: Route): Record<string, unknown> {
  const own: Route["responses"] = {
    ...route.responses,
    500: { description: "the function failed", schema: ProblemResponse },
  };
  const statuses = new Set([...Object.keys(own), ...Object.keys(GATEWAY_ANSWERS)].map(Number));
  const responses = [...statuses]
    .sort((a, b) => a - b)
    .flatMap((status) => {
      const answer = own[status];
      const gateway = GATEWAY_ANSWERS[status]?.(route);
      if (!answer && !gateway) return [];
      const content = {
        ...(answer?.schema
          ? status >= 400
            ? { "application/problem+json": { schema: PROBLEM } }
            : { "application/json": { schema: jsonSchemaOf(answer.schema) } }
          : {}),
        ...(gateway ? { "application/json": { schema: GATEWAY_MESSAGE } } : {}),
      };
      const description = [answer?.description, gateway && `API Gateway's own answer: ${gateway}`]
        .filter(Boolean)
        .join("; or ");
      return [
        [
          status,
          {
            description,
            ...(status === 401 && gateway ? { headers: { "WWW-Authenticate": CHALLENGE } } : {}),
            ...(Object.keys(content).length > 0 ? { content } : {}),
          },
        ],
      ];
    });
  return Object.fromEntries(responses);
}

/** The `WWW-Authenticate` of a 401: the token's problem (`error_description`). */
const CHALLENGE = {
  required: true,
  description: 'Bearer, with error="invalid_token" and the token\'s problem in error_description',
  schema: { type: "string" },
};

/** What a stream route's 200 sends. */
function streamAnswerOf(route: StreamRoute): string {
  if (route.format === "ag-ui")
    return "AG-UI events (one per message, `data:` as @ag-ui/encoder writes it), each with `id` its position in the event store's streams: resume with it as `Last-Event-ID`";
  return route.of === "conversation"
    ? "`event: conversation` with the turns new or changed since the last event; `id` is the view's revision"
    : "`event: run` with the run at each revision (`id`), then `event: end` when it is no longer RUNNING";
}

/** A stream route as an OpenAPI operation: server-sent events, resumed from Last-Event-ID. */
function streamOperationOf(route: StreamRoute): Record<string, unknown> {
  const idName = /\{([a-z_]+)\}/.exec(route.path)?.[1] ?? "id";
  const problem = {
    description: "a problem",
    content: { "application/problem+json": { schema: PROBLEM } },
  };
  return {
    operationId: route.operationId,
    summary: route.summary,
    [FEATURE_EXTENSION]: route.feature,
    security: [{ bearer: [] }],
    parameters: [
      { name: idName, in: "path", required: true, schema: { type: "string" } },
      {
        name: "Last-Event-ID",
        in: "header",
        required: false,
        description: "The id of the last event the client saw: the stream resumes after it.",
        schema:
          route.format === "ag-ui"
            ? { type: "string", maxLength: 4096 }
            : { type: "string", pattern: "^[0-9]+$" },
      },
      {
        name: "access_token",
        in: "query",
        required: false,
        description:
          "The bearer token, for a client that cannot set headers (a browser's EventSource).",
        schema: { type: "string" },
      },
    ],
    responses: {
      200: {
        description: streamAnswerOf(route),
        content: { "text/event-stream": { schema: { type: "string" } } },
      },
      400: problem,
      401: { ...problem, headers: { "WWW-Authenticate": CHALLENGE } },
      403: problem,
      404: problem,
      500: problem,
    },
  };
}
