import { jsonSchemaOf } from "../../functions/core/model-schema-export";
import { ROUTES, type Route } from "../../functions/front-door/api";

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
  return {
    openapi: "3.1.0",
    info: {
      title: "AgentBus",
      version: "1",
      description:
        "The front door of AgentBus: send a customer's message, follow its conversation. Every route but this document takes a bearer JWT whose claims name the tenant and the user.",
    },
    // Relative: the document is served by the API it describes (`<base URL>/openapi.json`).
    servers: [{ url: "/", description: "the API that serves this document" }],
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" } },
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
    ...(route.auth ? { security: [{ bearer: [] }] } : { security: [] }),
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
