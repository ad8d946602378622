import * as z from "zod";
import type { EventRegistry } from "./registry";

/**
 * The JSON Schema drafts the envelopes are exported in: 2020-12 for the committed files, draft 4
 * for the EventBridge Schema Registry (CloudFormation's `JSONSchemaDraft4`), written by zod itself.
 */
export type JsonSchemaTarget = "draft-2020-12" | "draft-04";

/**
 * JSON Schema of every registered event type's full envelope, keyed by file name
 * `<type>.v<schema_version>.json`. Refinements that JSON Schema cannot express (the opaque-id
 * personal-data check) are enforced by the zod schemas only.
 */
export function jsonSchemas(
  registry: EventRegistry,
  target: JsonSchemaTarget = "draft-2020-12",
): Record<string, object> {
  const out: Record<string, object> = {};
  for (const d of registry
    .definitions()
    .sort((a, b) => a.type.localeCompare(b.type) || a.schemaVersion - b.schemaVersion)) {
    const schema = registry.envelopeSchema(d.type, d.schemaVersion);
    if (!schema) continue;
    out[`${d.type}.v${d.schemaVersion}.json`] = {
      ...z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target }),
      // Draft 4 names a schema's id `id`; later drafts `$id`.
      [target === "draft-04" ? "id" : "$id"]: `agentbus/${d.type}/v${d.schemaVersion}`,
      title: d.type,
      description: d.description,
      "x-agentbus": { kind: d.kind, topic: d.topic, sequenced: d.sequenced },
    };
  }
  return out;
}
