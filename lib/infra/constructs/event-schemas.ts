/**
 * The registry's JSON Schemas as EventBridge Schema Registry documents, as pure functions.
 *
 * CloudFormation's `AWS::EventSchemas::Schema` takes `Type` `OpenApi3` or `JSONSchemaDraft4`;
 * there is no type for draft 2020-12, which `schemas/json-schema.ts` exports for the committed
 * files. So the documents are built from zod's own draft 4 output (`jsonSchemas(registry,
 * "draft-04")`): `id` for `$id`, one-value `enum` for `const`, draft 4's boolean exclusive bounds,
 * `definitions` for `$defs`; keywords draft 4 does not know are left out, so a schema only ever
 * gets looser in the registry than in zod, never stricter.
 *
 * A registry schema describes the whole EventBridge event, as the schemas EventBridge discovers
 * and provides do (code bindings type `detail` from it), so the envelope schema becomes the
 * `detail` of an event whose `detail-type` is the event type and whose `source` starts with
 * `agentbus`.
 */

type JsonObject = Record<string, unknown>;

export const DRAFT4_URI = "http://json-schema.org/draft-04/schema#";

/** The schema registry type of the documents built here. */
export const SCHEMA_TYPE = "JSONSchemaDraft4";

export interface EventSchemaInput {
  /** The event type: the EventBridge `detail-type`. */
  readonly type: string;
  readonly description: string;
  /** The draft 4 JSON Schema of the full envelope (`jsonSchemas(registry, "draft-04")[...]`). */
  readonly envelopeSchema: object;
  /** Prefix of the events' `source`. */
  readonly sourcePrefix: string;
}

/**
 * The registry document of one event type: a draft 4 schema of the EventBridge event carrying
 * the envelope as `detail`. The envelope's `id`, `$schema` and `definitions` move to the top, so
 * `#/definitions/...` references resolve from the document's root.
 */
export function eventBridgeSchema(input: EventSchemaInput): JsonObject {
  const { $schema: _draft, id, definitions, ...detail } = input.envelopeSchema as JsonObject;
  return {
    $schema: DRAFT4_URI,
    ...(id === undefined ? {} : { id }),
    title: input.type,
    description: input.description,
    type: "object",
    "x-amazon-events-detail-type": input.type,
    "x-amazon-events-source": input.sourcePrefix,
    required: ["detail-type", "source", "detail"],
    properties: {
      version: { type: "string" },
      id: { type: "string" },
      "detail-type": { type: "string", enum: [input.type] },
      source: { type: "string", pattern: `^${escapeRegExp(input.sourcePrefix)}` },
      account: { type: "string" },
      time: { type: "string", format: "date-time" },
      region: { type: "string" },
      resources: { type: "array", items: { type: "string" } },
      detail,
    },
    ...(definitions === undefined ? {} : { definitions }),
  };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
