import { z } from "zod";
import { operatorStepRoles } from "./groups";

/**
 * An example of what a step role answers, built from the role's output schema (the JSON Schema
 * its entry in the table of step roles carries): a starting point for a person who supplies a FAILED node's output by hand, or an agent
 * run's answer (./agent-answer.ts). Strings are
 * placeholders named after their field (`"<title>"`), numbers their minimum, enums their first
 * value; the example fits the schema.
 */

interface JsonSchema {
  readonly type?: string;
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly items?: JsonSchema;
  readonly enum?: readonly unknown[];
  readonly const?: unknown;
  readonly anyOf?: readonly JsonSchema[];
  readonly minimum?: number;
  readonly minItems?: number;
  readonly maxLength?: number;
}

function exampleOf(schema: JsonSchema, name: string): unknown {
  if (schema.const !== undefined) return schema.const;
  if (schema.enum?.length) return schema.enum[0];
  if (schema.anyOf?.[0]) return exampleOf(schema.anyOf[0], name);
  switch (schema.type) {
    case "object":
      return Object.fromEntries(
        Object.entries(schema.properties ?? {}).map(([key, value]) => [key, exampleOf(value, key)]),
      );
    case "array":
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () =>
        exampleOf(schema.items ?? {}, name),
      );
    case "integer":
    case "number":
      return schema.minimum ?? 0;
    case "boolean":
      return true;
    case "string":
      return `<${name}>`.slice(0, schema.maxLength ?? 200);
    default:
      return null;
  }
}

/** An output that fits `role`'s schema, or undefined when its entry carries none. */
export function outputExample(role: string): Record<string, unknown> | undefined {
  const schema = operatorStepRoles()[role]?.output;
  return schema && objectExample(exampleOf(schema as JsonSchema, "output"));
}

/** An object that fits `schema`, built as above; undefined when the schema is not an object's. */
export function schemaExample(schema: z.core.$ZodType): Record<string, unknown> | undefined {
  const example = exampleOf(
    z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchema,
    "output",
  );
  return objectExample(example);
}

const objectExample = (example: unknown): Record<string, unknown> | undefined =>
  example !== null && typeof example === "object" && !Array.isArray(example)
    ? (example as Record<string, unknown>)
    : undefined;
