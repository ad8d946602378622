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

// zod/mini's names, listed rather than `export *`: where zod/mini is an outside package (the
// compiled `agentbus` package), a star re-export becomes a namespace copied at run time, which a
// bundler cannot shake, so every function would carry all of zod, every locale (about 440 KB).
// test/schemas/zod.test.ts checks this list against zod/mini's own.
export type * from "zod/mini";
export {
  _default,
  _function,
  $brand,
  $input,
  $output,
  any,
  array,
  base64,
  base64url,
  bigint,
  boolean,
  catch,
  catchall,
  check,
  cidrv4,
  cidrv6,
  clone,
  codec,
  coerce,
  compile,
  config,
  core,
  creditCard,
  cuid,
  cuid2,
  currencyCode,
  custom,
  date,
  decode,
  decodeAsync,
  deepPartial,
  describe,
  discriminatedUnion,
  e164,
  email,
  emoji,
  encode,
  encodeAsync,
  endsWith,
  enum,
  exactOptional,
  exactPartial,
  extend,
  file,
  flattenError,
  float32,
  float64,
  formatError,
  function,
  getDiscriminatedOption,
  globalRegistry,
  gt,
  gte,
  guid,
  hash,
  hex,
  hostname,
  httpUrl,
  INVALID,
  iban,
  includes,
  input,
  instanceof,
  int,
  int32,
  int64,
  intersection,
  invertCodec,
  ipv4,
  ipv6,
  iso,
  json,
  jwt,
  keyof,
  ksuid,
  lazy,
  length,
  literal,
  locales,
  looseRecord,
  lowercase,
  lt,
  lte,
  mac,
  map,
  maximum,
  maxLength,
  maxSize,
  memoizer,
  merge,
  meta,
  mime,
  minimum,
  minLength,
  minSize,
  multipleOf,
  NEVER,
  nan,
  nanoid,
  nativeEnum,
  negative,
  never,
  nonnegative,
  nonoptional,
  nonpositive,
  normalize,
  null,
  nullable,
  nullish,
  number,
  omit,
  optional,
  output,
  overwrite,
  parse,
  parseAsync,
  partial,
  partialRecord,
  pick,
  pipe,
  positive,
  prefault,
  prettifyError,
  promise,
  properties,
  property,
  readonly,
  record,
  refine,
  regex,
  regexes,
  registry,
  required,
  safeDecode,
  safeDecodeAsync,
  safeEncode,
  safeEncodeAsync,
  safeExtend,
  safeParse,
  safeParseAsync,
  set,
  size,
  startsWith,
  string,
  stringbool,
  stringFormat,
  success,
  superRefine,
  symbol,
  TimePrecision,
  templateLiteral,
  toJSONSchema,
  toLowerCase,
  toUpperCase,
  toZod,
  transform,
  treeifyError,
  trim,
  tuple,
  uint32,
  uint64,
  ulid,
  undefined,
  union,
  unknown,
  uppercase,
  url,
  util,
  uuid,
  uuidv4,
  uuidv6,
  uuidv7,
  validate,
  validateAsync,
  void,
  withParser,
  xid,
  xor,
  ZodCompileAsyncError,
  ZodCompileUnsupportedError,
  ZodMiniAny,
  ZodMiniArray,
  ZodMiniBase64,
  ZodMiniBase64URL,
  ZodMiniBigInt,
  ZodMiniBigIntFormat,
  ZodMiniBoolean,
  ZodMiniCatch,
  ZodMiniCIDRv4,
  ZodMiniCIDRv6,
  ZodMiniCodec,
  ZodMiniCreditCard,
  ZodMiniCUID,
  ZodMiniCUID2,
  ZodMiniCustom,
  ZodMiniCustomStringFormat,
  ZodMiniDate,
  ZodMiniDefault,
  ZodMiniDiscriminatedUnion,
  ZodMiniE164,
  ZodMiniEmail,
  ZodMiniEmoji,
  ZodMiniEnum,
  ZodMiniExactOptional,
  ZodMiniFile,
  ZodMiniFunction,
  ZodMiniGUID,
  ZodMiniIBAN,
  ZodMiniIntersection,
  ZodMiniIPv4,
  ZodMiniIPv6,
  ZodMiniISODate,
  ZodMiniISODateTime,
  ZodMiniISODuration,
  ZodMiniISOTime,
  ZodMiniJWT,
  ZodMiniKSUID,
  ZodMiniLazy,
  ZodMiniLiteral,
  ZodMiniMAC,
  ZodMiniMap,
  ZodMiniNaN,
  ZodMiniNanoID,
  ZodMiniNever,
  ZodMiniNonOptional,
  ZodMiniNull,
  ZodMiniNullable,
  ZodMiniNumber,
  ZodMiniNumberFormat,
  ZodMiniObject,
  ZodMiniOptional,
  ZodMiniPipe,
  ZodMiniPrefault,
  ZodMiniPromise,
  ZodMiniReadonly,
  ZodMiniRecord,
  ZodMiniSet,
  ZodMiniString,
  ZodMiniStringFormat,
  ZodMiniSuccess,
  ZodMiniSymbol,
  ZodMiniTemplateLiteral,
  ZodMiniTransform,
  ZodMiniTuple,
  ZodMiniType,
  ZodMiniULID,
  ZodMiniUndefined,
  ZodMiniUnion,
  ZodMiniUnknown,
  ZodMiniURL,
  ZodMiniUUID,
  ZodMiniVoid,
  ZodMiniXID,
  ZodMiniXor,
} from "zod/mini";
/** The error class `parse` throws and `prettifyError` formats (zod/mini exports it under `core`). */
export { $ZodError } from "zod/v4/core";

/**
 * A JSON text (an environment value, say) read as `schema`: text that is not JSON fails with
 * "must be <expected>", and the parsed value is checked by `schema`.
 */
export function jsonText<T extends z.ZodMiniType>(schema: T, expected: string) {
  return z.pipe(
    z.pipe(
      z.string(),
      z.transform((text, ctx) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          ctx.issues.push({ code: "custom", message: `must be ${expected}`, input: text });
          return z.NEVER;
        }
      }),
    ),
    schema,
  );
}

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
