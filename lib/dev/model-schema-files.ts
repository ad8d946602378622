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
  const books = new Map<string, Record<string, unknown>>();
  for (const module of modules) {
    if (!module.modelSchemas) continue;
    const path = join(dirname(entryFromRoot(module.entry)), MODEL_SCHEMAS_FILE);
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

/** A module's entry as a path from the repository root, with `/` separators. */
function entryFromRoot(entry: string): string {
  const absolute = absoluteEntry(entry);
  if (!absolute) throw new Error(`handler entry ${JSON.stringify(entry)} names no file`);
  return relative(PACKAGE_ROOT, absolute).split(sep).join("/");
}
