/**
 * The registry's JSON Schemas as EventBridge Schema Registry documents, as pure functions.
 *
 * CloudFormation's `AWS::EventSchemas::Schema` takes `Type` `OpenApi3` or `JSONSchemaDraft4`;
 * there is no type for draft 2020-12, which `schemas/json-schema.ts` exports. So the content is
 * downgraded to draft 4 keyword by keyword (`toDraft4`): `$schema` names draft 4, `$id` becomes
 * `id`, `const` becomes a one-value `enum`, numeric `exclusiveMinimum`/`exclusiveMaximum` become
 * draft 4's boolean form, `$defs` become `definitions`, `prefixItems` become an `items` array,
 * boolean subschemas become `{}` / `{"not": {}}`. Later keywords draft 4 does not know
 * (`propertyNames`, `contains`, `if`/`then`/`else`, ...) are kept: draft 4 validators ignore
 * unknown keywords, so a schema only ever gets looser in the registry than in zod, never stricter.
 *
 * A registry schema describes the whole EventBridge event, as the schemas EventBridge discovers
 * and provides do (code bindings type `detail` from it), so the envelope schema becomes the
 * `detail` of an event whose `detail-type` is the event type and whose `source` starts with
 * `agentbus`.
 */

type Json = unknown;
type JsonObject = Record<string, Json>;

export const DRAFT4_URI = "http://json-schema.org/draft-04/schema#";

/** The schema registry type of the documents built here. */
export const SCHEMA_TYPE = "JSONSchemaDraft4";

/** Keywords whose value is one subschema. */
const SCHEMA_KEYWORDS = [
  "additionalProperties",
  "additionalItems",
  "not",
  "propertyNames",
  "contains",
  "if",
  "then",
  "else",
  "unevaluatedProperties",
  "unevaluatedItems",
];
/** Keywords whose value is an array of subschemas. */
const SCHEMA_ARRAY_KEYWORDS = ["anyOf", "allOf", "oneOf", "prefixItems"];
/** Keywords whose value maps names to subschemas. */
const SCHEMA_MAP_KEYWORDS = [
  "properties",
  "patternProperties",
  "definitions",
  "$defs",
  "dependentSchemas",
];

const isObject = (value: Json): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A JSON Schema (draft 2020-12, as zod exports it) rewritten for draft 4. Does not mutate. */
export function toDraft4(schema: Json): JsonObject {
  const root = convert(schema);
  return { $schema: DRAFT4_URI, ...withoutKey(root, "$schema") };
}

function convert(schema: Json): JsonObject {
  if (schema === true) return {};
  if (schema === false) return { not: {} };
  if (!isObject(schema)) {
    throw new Error(`not a JSON Schema: ${JSON.stringify(schema)?.slice(0, 80)}`);
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    if (SCHEMA_KEYWORDS.includes(key)) out[key] = convert(value);
    else if (SCHEMA_ARRAY_KEYWORDS.includes(key)) out[key] = (value as Json[]).map(convert);
    else if (SCHEMA_MAP_KEYWORDS.includes(key)) {
      out[key] = Object.fromEntries(
        Object.entries(value as JsonObject).map(([name, sub]) => [name, convert(sub)]),
      );
    } else if (key === "items") {
      out[key] = Array.isArray(value) ? value.map(convert) : convert(value);
    } else if (key === "dependencies") {
      out[key] = Object.fromEntries(
        Object.entries(value as JsonObject).map(([name, dep]) => [
          name,
          Array.isArray(dep) ? dep : convert(dep),
        ]),
      );
    } else out[key] = value;
  }
  return rewriteKeywords(out);
}

/** The draft 2020-12 keywords of one schema object (subschemas already converted), as draft 4. */
function rewriteKeywords(schema: JsonObject): JsonObject {
  const out: JsonObject = { ...schema };
  if ("$id" in out) {
    out.id = out.$id;
    delete out.$id;
  }
  if ("const" in out) {
    out.enum = [out.const];
    delete out.const;
  }
  for (const [exclusive, bound] of [
    ["exclusiveMinimum", "minimum"],
    ["exclusiveMaximum", "maximum"],
  ] as const) {
    if (typeof out[exclusive] === "number") {
      out[bound] = out[exclusive];
      out[exclusive] = true;
    }
  }
  if ("$defs" in out) {
    out.definitions = { ...(out.definitions as JsonObject | undefined), ...(out.$defs as object) };
    delete out.$defs;
  }
  if (typeof out.$ref === "string") out.$ref = out.$ref.replace(/^#\/\$defs\//, "#/definitions/");
  if ("prefixItems" in out) {
    // draft 2020-12: prefixItems = tuple, items = the rest; draft 4: items = tuple, additionalItems.
    if ("items" in out) out.additionalItems = out.items;
    out.items = out.prefixItems;
    delete out.prefixItems;
  }
  return out;
}

function withoutKey(object: JsonObject, key: string): JsonObject {
  const { [key]: _dropped, ...rest } = object;
  return rest;
}

export interface EventSchemaInput {
  /** The event type: the EventBridge `detail-type`. */
  readonly type: string;
  readonly description: string;
  /** The JSON Schema of the full envelope (`jsonSchemas(registry)[...]`). */
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
  const envelope = toDraft4(input.envelopeSchema);
  const { id, definitions, ...detail } = withoutKey(envelope, "$schema");
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
