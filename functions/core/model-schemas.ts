import { PermanentError } from "./errors";

/**
 * The JSON Schemas a role shows its model: each tool's input (`tool:<name>`) and the answer it
 * asks for (by name). They are generated from the role module's zod schemas (`modelSchemas`) by
 * `npm run schemas` into `model-schemas.json` in the role's folder, and the role imports that
 * file: no function bundle carries zod's JSON Schema converter (about 21 KB). A test checks the
 * committed files against the zod schemas (test/core/model-schemas.test.ts).
 */

export type JsonSchema = Readonly<Record<string, unknown>>;
export type ModelSchemas = Readonly<Record<string, JsonSchema>>;

/** The file each role folder's schemas are generated into. */
export const MODEL_SCHEMAS_FILE = "model-schemas.json";

/** The name a tool's input is kept under. */
export function toolSchemaName(tool: string): string {
  return `tool:${tool}`;
}

/** The schema `name` of `owner`'s generated book, or an error saying how to generate it. */
export function modelSchemaOf(schemas: ModelSchemas, name: string, owner: string): JsonSchema {
  const schema = schemas[name];
  if (schema === undefined)
    throw new PermanentError(
      "model.schema_missing",
      `${owner} has no JSON Schema ${JSON.stringify(name)} in its ${MODEL_SCHEMAS_FILE}: declare it in the role module's modelSchemas and run npm run schemas`,
    );
  return schema;
}
