/**
 * Is a new JSON Schema of a registered event version compatible with the one published before?
 * Compatible means backward compatible: every message valid under the old schema is valid under
 * the new one, so events stored under that version stay readable. Anything else needs a new
 * schema version with an upcaster (schemas/registry.ts).
 *
 * The check is structural and conservative: it walks both schemas side by side and reports every
 * keyword it cannot prove looser or equal (a changed `pattern` is reported, for example, because
 * regular expressions cannot be compared). Annotations (`description`, `title`, `default`, `$id`,
 * `$schema`, `x-agentbus`, `examples`) are ignored.
 */

type Schema = Record<string, unknown>;

const ANNOTATIONS = new Set([
  "description",
  "title",
  "default",
  "$id",
  "$schema",
  "x-agentbus",
  "examples",
]);
/** Keywords whose new value must not be larger than the old one. */
const LOWER_BOUNDS = ["minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties"];
/** Keywords whose new value must not be smaller than the old one. */
const UPPER_BOUNDS = ["maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties"];
/** Keywords whose value must stay exactly the same when the new schema has them. */
const EXACT = ["pattern", "format", "const", "multipleOf"];
const HANDLED = new Set([
  ...ANNOTATIONS,
  ...LOWER_BOUNDS,
  ...UPPER_BOUNDS,
  ...EXACT,
  "type",
  "enum",
  "required",
  "properties",
  "additionalProperties",
  "items",
  "anyOf",
]);

/** Why `next` may refuse a message `previous` accepted; [] when it cannot. */
export function incompatibilities(previous: unknown, next: unknown, path = "$"): string[] {
  if (!isSchema(next) || Object.keys(next).every((k) => ANNOTATIONS.has(k))) return [];
  if (!isSchema(previous)) return [`${path}: the old schema accepted anything`];
  if (Array.isArray(next.anyOf)) return intoAnyOf(previous, next, path);
  if (Array.isArray(previous.anyOf))
    return (previous.anyOf as unknown[]).flatMap((branch, i) =>
      incompatibilities(branch, next, `${path}|${i}`),
    );
  return [
    ...unhandled(previous, next, path),
    ...typeChanges(previous, next, path),
    ...boundChanges(previous, next, path),
    ...enumChanges(previous, next, path),
    ...objectChanges(previous, next, path),
    ...(next.items === undefined ? [] : incompatibilities(previous.items, next.items, `${path}[]`)),
  ];
}

function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Every old alternative must fit one of the new ones. */
function intoAnyOf(previous: Schema, next: Schema, path: string): string[] {
  const branches = next.anyOf as unknown[];
  const olds = Array.isArray(previous.anyOf) ? (previous.anyOf as unknown[]) : [previous];
  return olds.flatMap((old, i) =>
    branches.some((branch) => incompatibilities(old, branch, path).length === 0)
      ? []
      : [`${path}: alternative ${i} of the old schema fits none of the new alternatives`],
  );
}

/** Other keywords must stay as they were: their effect on what is accepted is not compared. */
function unhandled(previous: Schema, next: Schema, path: string): string[] {
  return Object.keys(next)
    .filter((k) => !HANDLED.has(k) && JSON.stringify(previous[k]) !== JSON.stringify(next[k]))
    .map((k) => `${path}: ${k} changed, and its effect cannot be compared`);
}

function typesOf(schema: Schema): string[] | undefined {
  const { type } = schema;
  if (type === undefined) return undefined;
  const types = Array.isArray(type) ? (type as string[]) : [type as string];
  // Every integer is a number.
  return types.includes("number") ? [...types, "integer"] : types;
}

function typeChanges(previous: Schema, next: Schema, path: string): string[] {
  const after = typesOf(next);
  if (after === undefined) return [];
  const before = typesOf(previous);
  if (before === undefined) return [`${path}: type ${JSON.stringify(next.type)} was added`];
  const lost = before.filter((t) => !after.includes(t));
  return lost.length === 0 ? [] : [`${path}: type ${lost.join(", ")} is no longer accepted`];
}

function boundChanges(previous: Schema, next: Schema, path: string): string[] {
  const out: string[] = [];
  const compare = (key: string, looser: (a: number, b: number) => boolean) => {
    const after = next[key];
    if (typeof after !== "number") return;
    const before = previous[key];
    if (typeof before !== "number") out.push(`${path}: ${key} ${after} was added`);
    else if (!looser(before, after)) out.push(`${path}: ${key} went from ${before} to ${after}`);
  };
  for (const key of LOWER_BOUNDS) compare(key, (a, b) => b <= a);
  for (const key of UPPER_BOUNDS) compare(key, (a, b) => b >= a);
  for (const key of EXACT) {
    if (next[key] === undefined) continue;
    if (JSON.stringify(previous[key]) !== JSON.stringify(next[key]))
      out.push(`${path}: ${key} changed to ${JSON.stringify(next[key])}`);
  }
  return out;
}

function enumChanges(previous: Schema, next: Schema, path: string): string[] {
  if (!Array.isArray(next.enum)) return [];
  const after = new Set(next.enum.map((v) => JSON.stringify(v)));
  if (!Array.isArray(previous.enum))
    return [`${path}: enum ${JSON.stringify(next.enum)} was added`];
  const lost = previous.enum.filter((v) => !after.has(JSON.stringify(v)));
  return lost.length === 0 ? [] : [`${path}: enum value(s) ${JSON.stringify(lost)} were removed`];
}

function objectChanges(previous: Schema, next: Schema, path: string): string[] {
  const out: string[] = [];
  const requiredBefore = new Set((previous.required as string[] | undefined) ?? []);
  for (const key of (next.required as string[] | undefined) ?? [])
    if (!requiredBefore.has(key)) out.push(`${path}.${key}: became required`);
  const before = (previous.properties as Schema | undefined) ?? {};
  const after = (next.properties as Schema | undefined) ?? {};
  for (const [key, schema] of Object.entries(after))
    if (key in before) out.push(...incompatibilities(before[key], schema, `${path}.${key}`));
  if (next.additionalProperties === false) {
    if (previous.additionalProperties !== false)
      out.push(`${path}: additional properties are no longer accepted`);
    for (const key of Object.keys(before))
      if (!(key in after)) out.push(`${path}.${key}: is no longer accepted`);
  } else if (isSchema(next.additionalProperties)) {
    out.push(
      ...incompatibilities(previous.additionalProperties, next.additionalProperties, `${path}.*`),
    );
  }
  return out;
}

/**
 * What keeps `next` (file name -> schema, as `jsonSchemas` builds them) from replacing the
 * published schemas: a published version no longer registered, or registered with a schema that
 * is not backward compatible with the published one.
 */
export function schemaProblems(
  published: Readonly<Record<string, unknown>>,
  next: Readonly<Record<string, unknown>>,
): string[] {
  return Object.entries(published).flatMap(([name, old]) => {
    if (!(name in next))
      return [`${name}: published, but no longer registered (stored events need it)`];
    return incompatibilities(old, next[name]).map(
      (problem) => `${name}: ${problem} (register the next version with an upcast instead)`,
    );
  });
}
