import fc from "fast-check";
import type * as z from "../../schemas/zod";

/**
 * Values shaped by a zod schema, for property tests that compare two parsers of it: mostly valid
 * ones (patterns, bounds, literals, required keys), some that a refinement or a bound they ignore
 * rejects, and, through `mutated`, broken ones. The node types of the registered event schemas
 * are covered; any other gets `fc.anything()`.
 */

interface Def {
  readonly type: string;
  readonly checks?: readonly { readonly _zod: { readonly def: CheckDef } }[];
  readonly shape?: Readonly<Record<string, Schema>>;
  readonly innerType?: Schema;
  readonly element?: Schema;
  readonly valueType?: Schema;
  readonly values?: readonly unknown[];
  readonly format?: string;
}

interface CheckDef {
  readonly check: string;
  readonly format?: string;
  readonly pattern?: RegExp;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly value?: number;
  readonly inclusive?: boolean;
}

interface Schema {
  readonly _zod: { readonly def: Def; readonly optin?: string; readonly values?: Set<unknown> };
}

export function arbitraryOf(schema: z.ZodMiniType): fc.Arbitrary<unknown> {
  return nodeArbitrary(schema as unknown as Schema);
}

function nodeArbitrary(node: Schema): fc.Arbitrary<unknown> {
  const { def } = node._zod;
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  switch (def.type) {
    case "object":
      return objectArbitrary(def.shape ?? {});
    case "string":
      return stringArbitrary(def, checks);
    case "number":
      return numberArbitrary(def, checks);
    case "boolean":
      return fc.boolean();
    case "literal":
      return fc.constantFrom(...(def.values ?? [null]));
    case "enum":
      return fc.constantFrom(...(node._zod.values ?? new Set([null])));
    case "nullable":
      return fc.option(inner(def), { nil: null, freq: 4 });
    case "optional":
    case "default":
      return fc.option(inner(def), { nil: undefined, freq: 3 });
    case "array":
      return fc.array(def.element ? nodeArbitrary(def.element) : fc.anything(), {
        minLength: bound(checks, "min_length", "minimum") ?? 0,
        maxLength: Math.min(bound(checks, "max_length", "maximum") ?? 3, 3),
      });
    case "record":
      return fc.dictionary(
        fc.string({ minLength: 1, maxLength: 8 }),
        def.valueType ? nodeArbitrary(def.valueType) : fc.jsonValue(),
        { maxKeys: 3 },
      );
    case "unknown":
    case "any":
      return fc.jsonValue({ maxDepth: 2 });
    default:
      return fc.anything({ maxDepth: 1 });
  }
}

function inner(def: Def): fc.Arbitrary<unknown> {
  return def.innerType ? nodeArbitrary(def.innerType) : fc.anything();
}

function objectArbitrary(shape: Readonly<Record<string, Schema>>): fc.Arbitrary<unknown> {
  const keys = Object.keys(shape);
  const model = Object.fromEntries(keys.map((k) => [k, nodeArbitrary(shape[k] as Schema)]));
  const requiredKeys = keys.filter((k) => shape[k]?._zod.optin === undefined);
  return fc.record(model, { requiredKeys });
}

function bound(
  checks: readonly CheckDef[],
  check: string,
  field: "minimum" | "maximum",
): number | undefined {
  return checks.find((c) => c.check === check)?.[field];
}

function stringArbitrary(def: Def, checks: readonly CheckDef[]): fc.Arbitrary<unknown> {
  const min = bound(checks, "min_length", "minimum") ?? 0;
  const max = bound(checks, "max_length", "maximum");
  const fits = (s: string) => s.length >= min && (max === undefined || s.length <= max);
  if (def.format === "datetime") {
    return fc
      .date({ min: new Date("2000-01-01"), max: new Date("2100-01-01"), noInvalidDate: true })
      .map((d) => d.toISOString());
  }
  const pattern = checks.find((c) => c.check === "string_format" && c.pattern)?.pattern;
  if (pattern) return fc.stringMatching(pattern).filter(fits);
  return fc.string({ minLength: min, maxLength: Math.min(max ?? 24, Math.max(min, 24)) });
}

function numberArbitrary(def: Def, checks: readonly CheckDef[]): fc.Arbitrary<unknown> {
  const lower = checks.find((c) => c.check === "greater_than");
  const upper = checks.find((c) => c.check === "less_than");
  const min = lower?.value === undefined ? undefined : lower.value + (lower.inclusive ? 0 : 1);
  const max = upper?.value === undefined ? undefined : upper.value - (upper.inclusive ? 0 : 1);
  if (def.format === "safeint") {
    return fc.integer({
      min: Math.max(min ?? -1000, Number.MIN_SAFE_INTEGER),
      max: Math.min(max ?? 1000, Number.MAX_SAFE_INTEGER),
    });
  }
  return fc.double({ min: min ?? -1e6, max: max ?? 1e6, noNaN: true });
}

/** A path into a value: object keys and array indexes. */
type Path = readonly (string | number)[];

function pathsOf(value: unknown, path: Path = [], out: Path[] = []): Path[] {
  if (value === null || typeof value !== "object") return out;
  const entries: [string | number, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value);
  for (const [key, child] of entries) {
    out.push([...path, key]);
    pathsOf(child, [...path, key], out);
  }
  return out;
}

/** A deep copy of `value` with `change` applied to the container of `path`'s last step. */
function edit(
  value: unknown,
  path: Path,
  change: (parent: Record<string | number, unknown>, key: string | number) => void,
): unknown {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let parent = copy;
  for (const step of path.slice(0, -1)) parent = parent[step] as Record<string | number, unknown>;
  const last = path.at(-1);
  if (last !== undefined) change(parent, last);
  return copy;
}

const REPLACEMENTS = fc.oneof(
  fc.constantFrom(null, undefined, 0, -1, 1.5, "", "x", true, [], {}, Number.NaN),
  fc.anything({ maxDepth: 1 }),
);

/**
 * `valid` broken in one place: a key removed, a value replaced (by another type, an empty or odd
 * value), or a key added that the schema does not know.
 */
export function mutated(valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc
    .tuple(valid, fc.nat(), fc.constantFrom("delete", "replace", "extra"), REPLACEMENTS)
    .map(([value, pick, how, replacement]) => {
      const paths = pathsOf(value);
      const path = paths.length === 0 ? [] : (paths[pick % paths.length] as Path);
      if (path.length === 0) return replacement;
      return edit(value, path, (parent, key) => {
        if (how === "delete") delete parent[key];
        else if (how === "replace") parent[key] = replacement;
        else if (!Array.isArray(parent)) parent.unknown_key_added = replacement;
      });
    });
}

/**
 * A value with every object turned into its entries, in order: parsed values compared with it
 * must agree on their key order and on keys present with `undefined`, not only on their values.
 */
export function ordered(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(ordered);
  if (value === null || typeof value !== "object") return value;
  return Object.entries(value).map(([k, v]) => [k, ordered(v)]);
}
