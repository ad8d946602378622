import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { registry } from "../schemas";
import { jsonSchemas } from "../schemas/json-schema";

/** Writes schemas/json/<type>.v<version>.json for every registered event type. */
const dir = join(import.meta.dirname, "..", "schemas", "json");
mkdirSync(dir, { recursive: true });
for (const old of readdirSync(dir)) if (old.endsWith(".json")) rmSync(join(dir, old));
const files = jsonSchemas(registry);
for (const [name, schema] of Object.entries(files))
  writeFileSync(join(dir, name), `${JSON.stringify(schema, null, 2)}\n`);
console.log(`wrote ${Object.keys(files).length} JSON Schemas to ${dir}`);
