import * as z from "zod/mini";
import * as core from "zod/v4/core";
import en from "zod/v4/locales/en.js";

/**
 * zod for every schema the functions carry: zod/mini, the same validation core as zod's classic
 * API with functions in place of methods (`z.optional(s)`, `s.check(z.minLength(1))`), which
 * leaves the classic API's per-instance methods and JSON-schema conversion out of every bundle
 * (`npm run bench -- bundles`). zod/mini speaks no language until told: English messages, as the
 * classic API gives. Tools and tests may use the classic API on these schemas' values: both share
 * the core.
 */
z.config(en());

export * from "zod/mini";
/** The error class `parse` throws and `prettifyError` formats (zod/mini exports it under `core`). */
export { $ZodError } from "zod/v4/core";

/** Each issue of a failed parse as `path: message`, the path `root` where the value itself fails. */
export function issueLines(
  error: { readonly issues: readonly core.$ZodIssue[] },
  root: string,
): string[] {
  return error.issues.map((i) => `${i.path.map(String).join(".") || root}: ${i.message}`);
}

/** A constructor's `init` (an assertion signature TypeScript will not call through a namespace). */
function initAs(base: { init: unknown }, inst: unknown, def: unknown): void {
  (base.init as (inst: unknown, def: unknown) => void)(inst, def);
}

/**
 * zod/mini's object, parsed as the classic API parses its objects: with the core's compiled
 * parser (`$ZodObjectJIT`, which builds one function per shape on first use) instead of the
 * interpreted one zod/mini picks to run where `new Function` is forbidden. Lambda allows it, and
 * validating an envelope takes about a third less CPU (7.5 -> 4.9 µs; a consumed event ~20 ->
 * ~17 µs), for about 4 KB of bundle. `extend`, `pick` and the other object functions clone a
 * schema with its constructor, so they keep this parser (test/schemas/zod.test.ts).
 */
const ZodMiniObjectJIT: core.$constructor<z.ZodMiniObject> = core.$constructor(
  "ZodMiniObject",
  (inst, def) => {
    initAs(core.$ZodObjectJIT, inst, def);
    initAs(z.ZodMiniType, inst, def);
    // As zod/mini's object: `shape` is the definition's, not enumerable.
    Object.defineProperty(inst, "shape", { value: def.shape, configurable: true });
  },
);

/** The object zod/mini builds (its parameters normalized), with the compiled parser. */
function compiled<T>(schema: T): T {
  return new ZodMiniObjectJIT((schema as z.ZodMiniObject)._zod.def) as T;
}

export const object: typeof z.object = (shape, params) => compiled(z.object(shape, params));
export const strictObject: typeof z.strictObject = (shape, params) =>
  compiled(z.strictObject(shape, params));
export const looseObject: typeof z.looseObject = (shape, params) =>
  compiled(z.looseObject(shape, params));
