import * as z from "zod";
import type { EventRegistry } from "./registry";

/**
 * JSON Schema (draft 2020-12) of every registered event type's full envelope, keyed by file name
 * `<type>.v<schema_version>.json`. Refinements that JSON Schema cannot express (the opaque-id
 * personal-data check) are enforced by the zod schemas only.
 */
export function jsonSchemas(registry: EventRegistry): Record<string, object> {
  const out: Record<string, object> = {};
  for (const d of registry
    .definitions()
    .sort((a, b) => a.type.localeCompare(b.type) || a.schemaVersion - b.schemaVersion)) {
    const schema = registry.envelopeSchema(d.type, d.schemaVersion);
    if (!schema) continue;
    out[`${d.type}.v${d.schemaVersion}.json`] = {
      ...z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }),
      $id: `agentbus/${d.type}/v${d.schemaVersion}`,
      title: d.type,
      description: d.description,
      "x-agentbus": { kind: d.kind, topic: d.topic, sequenced: d.sequenced },
    };
  }
  return out;
}
