import { dirname, join, relative, sep } from "node:path";
import { jsonSchemasOf } from "../../functions/core/model-schema-export";
import { MODEL_SCHEMAS_FILE } from "../../functions/core/model-schemas";
import type { RoleModule } from "../../functions/core/role-module";
import { absoluteEntry } from "../infra/handler-entry";
import { PACKAGE_ROOT } from "../infra/package-root";

/**
 * The model-schemas.json of every role folder whose modules declare `modelSchemas`
 * (functions/core/model-schemas.ts), keyed by path from the repository root, as `npm run schemas`
 * writes them. Modules that share a folder (the content agents) share its file; a name declared
 * twice with different schemas is an error.
 */
export function modelSchemaFiles(modules: readonly RoleModule[]): Record<string, string> {
  const byFolder = new Map<string, RoleModule[]>();
  for (const module of modules) {
    if (!module.modelSchemas) continue;
    const path = join(dirname(entryFromRoot(module.entry)), MODEL_SCHEMAS_FILE);
    byFolder.set(path, [...(byFolder.get(path) ?? []), module]);
  }
  return Object.fromEntries(
    [...byFolder].map(([path, shared]) => [path, modelSchemasJson(shared, path)]),
  );
}

/**
 * The text of the `model-schemas.json` beside modules that share a folder (the content agents
 * share one): every schema they show their model (`modelSchemas`), as JSON Schema, by name,
 * sorted. What `npm run schemas` writes for this repository's roles; an application writes its
 * own agent's with it (`agentbus/testing`) and checks it in a test. A name two modules declare
 * differently is an error naming `file`.
 */
export function modelSchemasJson(
  modules: readonly Pick<RoleModule, "modelSchemas">[],
  file = MODEL_SCHEMAS_FILE,
): string {
  const book: Record<string, unknown> = {};
  for (const module of modules)
    for (const [name, schema] of Object.entries(jsonSchemasOf(module.modelSchemas ?? {}))) {
      if (name in book && JSON.stringify(book[name]) !== JSON.stringify(schema))
        throw new Error(`${file}: two modules declare ${name} differently`);
      book[name] = schema;
    }
  const sorted = Object.fromEntries(Object.entries(book).sort(([a], [b]) => a.localeCompare(b)));
  return `${JSON.stringify(sorted, null, 2)}\n`;
}

/** A module's entry as a path from the repository root, with `/` separators. */
function entryFromRoot(entry: string): string {
  const absolute = absoluteEntry(entry);
  if (!absolute) throw new Error(`handler entry ${JSON.stringify(entry)} names no file`);
  return relative(PACKAGE_ROOT, absolute).split(sep).join("/");
}
