import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  WORKFLOW_DEFINITION_SCHEMA_FILE,
  workflowDefinitionJsonSchema,
} from "../functions/core/dag/json-schema";
import { ROLE_MODULES } from "../functions/roles/modules";
import { modelSchemaFiles } from "../lib/dev/model-schema-files";
import { openApiDocument } from "../lib/dev/openapi";
import { personalDataSection, withPersonalDataSection } from "../lib/dev/personal-data-table";
import { registry } from "../schemas";
import { schemaProblems } from "../schemas/compat";
import { jsonSchemas } from "../schemas/json-schema";

/**
 * Writes schemas/json/<type>.v<version>.json for every registered event type. A file already
 * there is a published version: it is overwritten only when the new schema is backward compatible
 * with it, and never deleted (events stored under it must stay readable). Otherwise nothing is
 * written and the problems are printed: register the next version with an upcaster instead.
 *
 * Then writes each role folder's model-schemas.json: what the role shows its model
 * (functions/core/model-schemas.ts), the front door's OpenAPI document, the workflow definition
 * language's JSON Schema (functions/core/dag/json-schema.ts) and the personal-data table of
 * functions/roles/README.md (lib/dev/personal-data-table.ts).
 */
const dir = join(import.meta.dirname, "..", "schemas", "json");
mkdirSync(dir, { recursive: true });
const files = jsonSchemas(registry);
const published = Object.fromEntries(
  readdirSync(dir)
    .filter((name) => name.endsWith(".json"))
    .map((name) => [name, JSON.parse(readFileSync(join(dir, name), "utf8")) as unknown]),
);
const problems = schemaProblems(published, files);
if (problems.length > 0) {
  console.error(`not written: ${problems.length} incompatible change(s)\n${problems.join("\n")}`);
  process.exit(1);
}
let changed = 0;
for (const [name, schema] of Object.entries(files)) {
  const text = `${JSON.stringify(schema, null, 2)}\n`;
  const path = join(dir, name);
  if (existsSync(path) && readFileSync(path, "utf8") === text) continue;
  writeFileSync(path, text);
  changed++;
}
console.log(`${Object.keys(files).length} JSON Schemas in ${dir}, ${changed} written`);

const root = join(import.meta.dirname, "..");
const OPENAPI_FILE = "functions/front-door/openapi.json";
const ROLES_README = "functions/roles/README.md";
const modelFiles = modelSchemaFiles(ROLE_MODULES);
let modelChanged = 0;
const generated = {
  ...modelFiles,
  [OPENAPI_FILE]: `${JSON.stringify(openApiDocument(), null, 2)}\n`,
  [WORKFLOW_DEFINITION_SCHEMA_FILE]: `${JSON.stringify(workflowDefinitionJsonSchema(), null, 2)}\n`,
  [ROLES_README]: withPersonalDataSection(
    readFileSync(join(root, ROLES_README), "utf8"),
    personalDataSection(registry),
  ),
};
for (const [path, text] of Object.entries(generated)) {
  const full = join(root, path);
  if (existsSync(full) && readFileSync(full, "utf8") === text) continue;
  writeFileSync(full, text);
  modelChanged++;
}
console.log(
  `${Object.keys(modelFiles).length} model-schemas.json files, the front door's OpenAPI document, the workflow definition schema and the README's personal-data table, ${modelChanged} written`,
);
