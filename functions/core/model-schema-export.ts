import * as z from "../../schemas/zod";
import type { JsonSchema, ModelSchemas } from "./model-schemas";

/**
 * zod schemas as the JSON Schemas a model is shown (./model-schemas.ts). For the generator
 * (`npm run schemas`) and tests only: function code reads the generated files, so zod's JSON
 * Schema converter stays out of the bundles.
 */

/** One zod schema as JSON Schema (as input: what the model writes is parsed by it). */
export function jsonSchemaOf(schema: z.core.$ZodType): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    io: "input",
    unrepresentable: "any",
  }) as Record<string, unknown>;
  return rest;
}

/** A book of zod schemas by name, as JSON Schemas. */
export function jsonSchemasOf(schemas: Readonly<Record<string, z.core.$ZodType>>): ModelSchemas {
  return Object.fromEntries(
    Object.entries(schemas).map(([name, schema]) => [name, jsonSchemaOf(schema)]),
  );
}
