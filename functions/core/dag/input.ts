import * as z from "../../../schemas/zod";
import { show } from "./values";

/**
 * A workflow's declared run input (`input` of a definition): a small subset of JSON Schema that a
 * form can be made from, an object whose properties are strings, numbers, integers or booleans,
 * each with an optional `enum`, bounds, `title`, `description` and `default`, and a `required`
 * list. Every start (the CLI, the front door, the console, the orchestrator itself) checks the run
 * input against it with `runInputProblems`, which names every problem at once; a definition
 * without one takes any JSON object. Properties not declared are taken and travel along, unless
 * `additionalProperties` is false.
 */

const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const FieldName = z
  .string()
  .check(z.regex(FIELD_NAME, { message: "must be 1-64 characters of A-Z a-z 0-9 _" }));

export const INPUT_FIELD_TYPES = ["string", "number", "integer", "boolean"] as const;
export type InputFieldType = (typeof INPUT_FIELD_TYPES)[number];

/** The most properties a declared input may have. */
export const MAX_INPUT_FIELDS = 50;

const Scalar = z.union([z.string(), z.number(), z.boolean()]);

export const InputFieldSchema = z
  .strictObject({
    type: z.enum(INPUT_FIELD_TYPES),
    /** A short label for a form (the property's name when absent). */
    title: z.optional(z.string().check(z.maxLength(200))),
    description: z.optional(z.string().check(z.maxLength(1000))),
    /** The values allowed (a form offers them as a choice). */
    enum: z.optional(
      z.array(z.union([z.string(), z.number()])).check(z.minLength(1), z.maxLength(100)),
    ),
    /** A string's length bounds. */
    minLength: z.optional(z.int().check(z.nonnegative())),
    maxLength: z.optional(z.int().check(z.positive())),
    /** A number's bounds (both included). */
    minimum: z.optional(z.number()),
    maximum: z.optional(z.number()),
    /** What a form fills in first (not applied to a start that leaves the property out). */
    default: z.optional(Scalar),
  })
  .check(
    z.superRefine((field, ctx) => {
      for (const message of fieldSpecProblems(field)) ctx.addIssue({ code: "custom", message });
    }),
  );

export const RunInputSpecSchema = z
  .strictObject({
    type: z.literal("object"),
    description: z.optional(z.string().check(z.maxLength(1000))),
    properties: z._default(
      z.record(FieldName, InputFieldSchema).check(
        z.refine((p) => Object.keys(p).length <= MAX_INPUT_FIELDS, {
          message: `at most ${MAX_INPUT_FIELDS} properties`,
        }),
      ),
      {},
    ),
    /** The properties a start must give. */
    required: z._default(z.array(FieldName), []),
    /** false: a start may give no property that is not declared. @default true */
    additionalProperties: z.optional(z.boolean()),
  })
  .check(
    z.superRefine((spec, ctx) => {
      for (const name of spec.required)
        if (!(name in spec.properties))
          ctx.addIssue({
            code: "custom",
            path: ["required"],
            message: `${name} is required but not among the properties (${Object.keys(spec.properties).join(", ") || "none"})`,
          });
    }),
  );

export type InputField = z.output<typeof InputFieldSchema>;
export type RunInputSpec = z.output<typeof RunInputSpecSchema>;

/** What is inconsistent in one property's declaration (its values against its type and bounds). */
function fieldSpecProblems(field: z.output<typeof InputFieldSchema>): string[] {
  const problems: string[] = [];
  const stringBounds = field.minLength !== undefined || field.maxLength !== undefined;
  const numberBounds = field.minimum !== undefined || field.maximum !== undefined;
  if (stringBounds && field.type !== "string")
    problems.push(`minLength and maxLength bound a string, not a ${field.type}`);
  if (numberBounds && field.type !== "number" && field.type !== "integer")
    problems.push(`minimum and maximum bound a number, not a ${field.type}`);
  if (field.type === "boolean" && field.enum !== undefined)
    problems.push("a boolean has no enum (it is true or false)");
  if ((field.minLength ?? 0) > (field.maxLength ?? Number.POSITIVE_INFINITY))
    problems.push(`minLength ${field.minLength} is above maxLength ${field.maxLength}`);
  if ((field.minimum ?? Number.NEGATIVE_INFINITY) > (field.maximum ?? Number.POSITIVE_INFINITY))
    problems.push(`minimum ${field.minimum} is above maximum ${field.maximum}`);
  const plain = { ...field, enum: undefined, default: undefined };
  for (const value of field.enum ?? [])
    for (const p of valueProblems(plain, value)) problems.push(`enum value ${show(value)} ${p}`);
  if (field.default !== undefined)
    for (const p of valueProblems(field, field.default))
      problems.push(`default ${show(field.default)} ${p}`);
  return problems;
}

/** Why `value` does not fit the property `field` (none when it does). */
function valueProblems(field: InputField, value: unknown): string[] {
  const { type } = field;
  if (type === "boolean") return typeof value === "boolean" ? [] : ["must be true or false"];
  if (type === "string") {
    if (typeof value !== "string") return ["must be a string"];
    const problems: string[] = [];
    if (field.minLength !== undefined && [...value].length < field.minLength)
      problems.push(`must be at least ${characters(field.minLength)}`);
    if (field.maxLength !== undefined && [...value].length > field.maxLength)
      problems.push(`must be at most ${characters(field.maxLength)}`);
    return [...problems, ...enumProblems(field, value)];
  }
  if (typeof value !== "number" || !Number.isFinite(value))
    return [type === "integer" ? "must be an integer" : "must be a number"];
  if (type === "integer" && !Number.isInteger(value)) return ["must be an integer"];
  const problems: string[] = [];
  if (field.minimum !== undefined && value < field.minimum)
    problems.push(`must be at least ${field.minimum}`);
  if (field.maximum !== undefined && value > field.maximum)
    problems.push(`must be at most ${field.maximum}`);
  return [...problems, ...enumProblems(field, value)];
}

const characters = (n: number) => `${n} character${n === 1 ? "" : "s"}`;

function enumProblems(field: InputField, value: string | number): string[] {
  if (field.enum === undefined || field.enum.includes(value)) return [];
  return [`must be one of ${field.enum.map((v) => JSON.stringify(v)).join(", ")}`];
}

/**
 * Every way `input` does not fit the declared input `spec`, one line each (`name: why (got ...)`);
 * none when it fits. Without a spec, any JSON object fits.
 */
export function runInputProblems(spec: RunInputSpec | undefined, input: unknown): string[] {
  if (input === null || typeof input !== "object" || Array.isArray(input))
    return [`(input): must be a JSON object (got ${show(input)})`];
  if (!spec) return [];
  const record = input as Record<string, unknown>;
  const problems: string[] = [];
  for (const name of spec.required)
    if (record[name] === undefined) problems.push(`${name}: required`);
  for (const [name, value] of Object.entries(record)) {
    const field = spec.properties[name];
    if (!field) {
      if (spec.additionalProperties === false)
        problems.push(
          `${name}: not a property of this workflow's input (properties: ${Object.keys(spec.properties).join(", ") || "none"})`,
        );
      continue;
    }
    for (const p of valueProblems(field, value))
      problems.push(`${name}: ${p} (got ${show(value)})`);
  }
  return problems;
}
