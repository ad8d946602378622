import { jsonSchemaOf } from "../../functions/core/model-schema-export";
import { ROUTES, type Route } from "../../functions/front-door/api";
import { ProblemResponse } from "../../functions/front-door/contract";
import { STREAM_ROUTES, type StreamRoute } from "../../functions/front-door/stream";

/**
 * The front door's OpenAPI 3.1 document, made from its routes (functions/front-door/api.ts) and
 * their zod schemas. `npm run schemas` writes it to functions/front-door/openapi.json, which the
 * API serves at `/v1/openapi.json` (the function carries no JSON Schema converter); a test checks
 * the file is current and valid.
 */
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
      description:
        "The front door of AgentBus: send a customer's message, follow its conversation, start and follow a workflow run. Clients send a bearer JWT whose claims name the tenant and the user; services sign their requests with AWS credentials and call the same routes under /v1/tenants/{tenant_id}. This document takes neither.",
    },
    // Relative: the document is served by the API it describes (`<base URL>/openapi.json`).
    servers: [{ url: "/", description: "the API that serves this document" }],
    components: {
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
  const parameters = [...pathParams, ...idempotency];
  return {
    operationId: route.operationId,
    summary: route.summary,
    security: route.auth === "none" ? [] : [{ [route.auth === "iam" ? "sigv4" : "bearer"]: [] }],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body
      ? {
          requestBody: {
            required: true,
            content: { "application/json": { schema: jsonSchemaOf(route.body) } },
          },
        }
      : {}),
    responses: Object.fromEntries(
      Object.entries(route.responses).map(([status, response]) => [
        status,
        {
          description: response.description,
          ...(response.schema
            ? {
                content: {
                  [Number(status) >= 400 ? "application/problem+json" : "application/json"]: {
                    schema: jsonSchemaOf(response.schema),
                  },
                },
              }
            : {}),
        },
      ]),
    ),
  };
}

/** A stream route as an OpenAPI operation: server-sent events, resumed from Last-Event-ID. */
function streamOperationOf(route: StreamRoute): Record<string, unknown> {
  const idName = /\{([a-z_]+)\}/.exec(route.path)?.[1] ?? "id";
  const problem = {
    description: "a problem",
    content: { "application/problem+json": { schema: jsonSchemaOf(ProblemResponse) } },
  };
  return {
    operationId: route.operationId,
    summary: route.summary,
    security: [{ bearer: [] }],
    parameters: [
      { name: idName, in: "path", required: true, schema: { type: "string" } },
      {
        name: "Last-Event-ID",
        in: "header",
        required: false,
        description: "The id of the last event the client saw: the stream resumes after it.",
        schema: { type: "string", pattern: "^[0-9]+$" },
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
        description:
          route.of === "conversation"
            ? "`event: conversation` with the turns new or changed since the last event; `id` is the view's revision"
            : "`event: run` with the run at each revision (`id`), then `event: end` when it is no longer RUNNING",
        content: { "text/event-stream": { schema: { type: "string" } } },
      },
      400: problem,
      401: problem,
      403: problem,
      404: problem,
    },
  };
}
