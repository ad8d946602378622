import { dirname, join } from "node:path";
import { jsonSchemasOf } from "../../functions/core/model-schema-export";
import { MODEL_SCHEMAS_FILE } from "../../functions/core/model-schemas";
import type { RoleModule } from "../../functions/core/role-module";

/**
 * The model-schemas.json of every role folder whose modules declare `modelSchemas`
 * (functions/core/model-schemas.ts), keyed by path from the repository root, as `npm run schemas`
 * writes them. Modules that share a folder (the content agents) share its file; a name declared
 * twice with different schemas is an error.
 */
export function modelSchemaFiles(modules: readonly RoleModule[]): Record<string, string> {
  const books = new Map<string, Record<string, unknown>>();
  for (const module of modules) {
    if (!module.modelSchemas) continue;
    const path = join(dirname(module.entry), MODEL_SCHEMAS_FILE);
    const book = books.get(path) ?? {};
    for (const [name, schema] of Object.entries(jsonSchemasOf(module.modelSchemas))) {
      if (name in book && JSON.stringify(book[name]) !== JSON.stringify(schema))
        throw new Error(`${path}: two modules declare ${name} differently`);
      book[name] = schema;
    }
    books.set(path, book);
  }
  return Object.fromEntries(
    [...books].map(([path, book]) => [
      path,
      `${JSON.stringify(Object.fromEntries(Object.entries(book).sort(([a], [b]) => a.localeCompare(b))), null, 2)}\n`,
    ]),
  );
}
