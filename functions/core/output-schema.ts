import * as z from "../../schemas/zod";

/**
 * A step's output schema as data: the JSON Schema its role declares (`steps.output`, written
 * with zod and turned into JSON Schema when the stack's table of step roles is made,
 * ./steps.ts), so that an orchestrator that holds none of the role's code checks an output a
 * person gives for one of its nodes. It checks the subset zod writes for plain objects: `type`
 * (object, array, string, integer, number, boolean, null), `properties`, `required`,
 * `additionalProperties: false`, `items`, `enum`, `const`, `anyOf`, string and array lengths and
 * number bounds; a keyword outside it is not checked. A rule the schema cannot say (a zod
 * `refine`) is the role's own to check when it answers.
 */

/** A JSON Schema, as JSON. */
export type OutputSchema = Readonly<Record<string, unknown>>;

/** The JSON Schema of a zod schema of a step's output (what the stack's table carries). */
export function outputSchemaOf(schema: z.ZodMiniType): OutputSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
  return rest;
}

/** The path of the output itself in an issue; a field's is its name (`title`, `claims[0]`). */
const ROOT = "(output)";

/** Every way `value` does not fit `schema`, each a line naming where (`path`). */
export function outputSchemaIssues(schema: OutputSchema, value: unknown, path = ROOT): string[] {
  const issues: string[] = [];
  const say = (message: string) => issues.push(`${path}: ${message}`);
  if (Array.isArray(schema.anyOf)) {
    const fits = schema.anyOf.some(
      (s) => outputSchemaIssues(s as OutputSchema, value).length === 0,
    );
    if (!fits) say("fits none of the schemas it may take");
  }
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value))
    say(`must be ${JSON.stringify(schema.const)}`);
  if (Array.isArray(schema.enum) && !schema.enum.some((v) => v === value))
    say(`must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
  if (typeof schema.type === "string" && !hasType(schema.type, value)) {
    say(`must be ${schema.type === "integer" ? "an integer" : `of type ${schema.type}`}`);
    return issues;
  }
  if (typeof value === "string")
    issues.push(...boundIssues(path, value.length, schema, "Length", "characters"));
  if (typeof value === "number") issues.push(...numberIssues(path, value, schema));
  if (Array.isArray(value)) {
    issues.push(...boundIssues(path, value.length, schema, "Items", "items"));
    if (isSchema(schema.items))
      value.forEach((item, i) => {
        issues.push(
          ...outputSchemaIssues(
            schema.items as OutputSchema,
            item,
            `${path === ROOT ? "" : path}[${i}]`,
          ),
        );
      });
  }
  if (isObject(value)) issues.push(...objectIssues(path, value, schema));
  return issues;
}

/** Each property in the schema's order (missing, or not fitting), then those it does not allow. */
function objectIssues(
  path: string,
  value: Record<string, unknown>,
  schema: OutputSchema,
): string[] {
  const issues: string[] = [];
  const properties = isSchema(schema.properties)
    ? (schema.properties as Record<string, OutputSchema>)
    : {};
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  const at = (key: string) => (path === ROOT ? key : `${path}.${key}`);
  for (const [key, property] of Object.entries(properties)) {
    if (value[key] !== undefined) issues.push(...outputSchemaIssues(property, value[key], at(key)));
    else if (required.includes(key)) issues.push(`${at(key)}: is required`);
  }
  for (const key of required)
    if (!(key in properties) && value[key] === undefined) issues.push(`${at(key)}: is required`);
  if (schema.additionalProperties === false)
    for (const key of Object.keys(value))
      if (!(key in properties)) issues.push(`${at(key)}: is not allowed`);
  return issues;
}

function boundIssues(
  path: string,
  size: number,
  schema: OutputSchema,
  keyword: "Length" | "Items",
  unit: string,
): string[] {
  const min = schema[`min${keyword}`];
  const max = schema[`max${keyword}`];
  if (typeof min === "number" && size < min) return [`${path}: must have at least ${min} ${unit}`];
  if (typeof max === "number" && size > max) return [`${path}: must have at most ${max} ${unit}`];
  return [];
}

function numberIssues(path: string, value: number, schema: OutputSchema): string[] {
  const { minimum, maximum } = schema;
  if (typeof minimum === "number" && value < minimum)
    return [`${path}: must be at least ${minimum}`];
  if (typeof maximum === "number" && value > maximum)
    return [`${path}: must be at most ${maximum}`];
  return [];
}

function hasType(type: string, value: unknown): boolean {
  if (type === "object") return isObject(value);
  if (type === "array") return Array.isArray(value);
  if (type === "integer") return Number.isInteger(value);
  if (type === "null") return value === null;
  return typeof value === type;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isSchema = (value: unknown): boolean => isObject(value);
