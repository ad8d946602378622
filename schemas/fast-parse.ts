import * as z from "./zod";

/**
 * A fast parser for the envelope schemas: it returns the parsed value of a message the schema
 * accepts, or `INVALID`, and the registry then asks zod's runtime parser, which decides and words
 * the error exactly as it would alone. Only a wrong *success* could change a result, and the
 * property test (test/schemas/fast-parse.test.ts) compares both parsers, value and key order, on
 * generated valid and broken messages of every registered type.
 *
 * Every message is validated once, and zod's runtime spends most of that time on its per-node
 * machinery (a payload object and an issues array per field, a check loop per string) rather than
 * on the checks. zod ships the remedy, `z.compile`, but its code generator adds about 30 KB to
 * every function bundle, more than their size budget leaves. This module generates, as zod does,
 * one function per schema with `new Function`, for the node types envelopes and most payloads are
 * made of (object, array, string, number, boolean, literal, enum, unknown, optional, nullable,
 * default), and calls each node's checks through zod's own check functions, so no pattern or
 * bound is written twice. Any other node (a record, a union, ...) is an island: zod's runtime
 * parses it, with the context `safeParse` gives.
 */

/** What a fast parser returns for input it does not accept. */
export const INVALID: typeof z.INVALID = z.INVALID;

export type Parser = (value: unknown) => unknown;

/** The internals of a zod schema read here (zod/v4/core's `$ZodTypeInternals`). */
interface Internals {
  readonly def: {
    readonly type: string;
    readonly checks?: readonly Check[];
    readonly coerce?: boolean;
    readonly innerType?: Node;
    readonly shape?: Readonly<Record<string, Node>>;
    readonly catchall?: Node;
    readonly element?: Node;
  };
  readonly traits: ReadonlySet<string>;
  readonly optin?: "optional" | "defaulted";
  readonly optout?: "optional";
  readonly values?: ReadonlySet<unknown>;
  readonly run: (payload: Payload, ctx: { async: false }) => Payload | Promise<Payload>;
}

interface Node {
  readonly _zod: Internals;
}

interface Check {
  readonly _zod: {
    readonly def: { readonly when?: (payload: Payload) => boolean };
    readonly check: (payload: Payload) => unknown;
  };
}

interface Payload {
  value: unknown;
  issues: unknown[];
}

export interface FastParser {
  /**
   * The generated parser; undefined when no part of the schema is covered here, or where code
   * cannot be generated.
   */
  readonly parse: Parser | undefined;
  /** Paths (dotted; "" for the root) of the nodes left to zod's runtime. */
  readonly islands: readonly string[];
}

/** The fast parser of `schema`: generated code where it can, zod's runtime for the rest. */
export function fastParserOf(schema: z.ZodMiniType): FastParser {
  const gen = new Generator();
  const out = gen.node(schema as unknown as Node, "input", "");
  if (gen.islands.includes("")) return { parse: undefined, islands: gen.islands };
  try {
    return { parse: gen.compile(out), islands: gen.islands };
  } catch {
    // Where code cannot be generated (`new Function` forbidden), zod's runtime parses alone.
    return { parse: undefined, islands: gen.islands };
  }
}

/** The body of one parser: statements that bind each node's output or `return I`. */
class Generator {
  readonly islands: string[] = [];
  private readonly lines: string[] = [];
  /** Values the generated code refers to (checks, nodes, literal sets), as `r0`, `r1`, ... */
  private readonly refs: unknown[] = [];
  private count = 0;
  private usesPayload = false;
  /** The nodes being generated, outermost first. */
  private readonly open = new Set<Node>();

  compile(out: string): Parser {
    const bind = this.refs.map((_, i) => `const r${i} = refs[${i}];`).join("\n");
    const payload = this.usesPayload ? "const p = { value: undefined, issues: [] };" : "";
    const body = `${bind}\nreturn function parse(input) {\n${payload}\n${this.lines.join("\n")}\nreturn ${out};\n};`;
    return new Function("refs", "I", body)(this.refs, INVALID) as Parser;
  }

  /** Emits the parse of `node` applied to the variable `x`; returns the output's variable. */
  node(node: Node, x: string, path: string): string {
    // A schema that contains itself (a getter in a shape) is parsed by zod's runtime from there.
    if (this.open.has(node)) return this.island(node, x, path);
    this.open.add(node);
    const out = this.own(node, x, path);
    this.open.delete(node);
    if (out === undefined) return this.island(node, x, path);
    return this.checks(node, out);
  }

  private ref(value: unknown): string {
    this.refs.push(value);
    return `r${this.refs.length - 1}`;
  }

  private fresh(): string {
    return `v${this.count++}`;
  }

  private emit(line: string): void {
    this.lines.push(line);
  }

  /** The node left to zod's runtime, with the context `safeParse` gives (./parse.js in zod). */
  private island(node: Node, x: string, path: string): string {
    this.islands.push(path);
    const result = this.fresh();
    this.emit(
      `const ${result} = ${this.ref(node)}._zod.run({ value: ${x}, issues: [] }, { async: false });`,
    );
    this.emit(`if (${result} instanceof Promise || ${result}.issues.length > 0) return I;`);
    return `${result}.value`;
  }

  /**
   * The node's checks as zod's runtime runs them after its parse: the node itself first when it
   * is one (a string format), each in turn unless its `when` declines; one that overwrites the
   * value (trim, ...) leaves its result in the payload.
   */
  private checks(node: Node, value: string): string {
    const { def, traits } = node._zod;
    const checks = [
      ...(traits.has("$ZodCheck") ? [node as unknown as Check] : []),
      ...(def.checks ?? []),
    ];
    if (checks.length === 0) return value;
    this.usesPayload = true;
    this.emit(`p.value = ${value};`);
    for (const check of checks) {
      const run = `if (${this.ref(check._zod.check)}(p) instanceof Promise || p.issues.length > 0) return I;`;
      const { when } = check._zod.def;
      this.emit(when === undefined ? run : `if (${this.ref(when)}(p)) { ${run} }`);
    }
    const out = this.fresh();
    this.emit(`const ${out} = p.value;`);
    return out;
  }

  /** The node's own parse for the types covered here; undefined for any other. */
  private own(node: Node, x: string, path: string): string | undefined {
    const { def } = node._zod;
    if (def.coerce) return undefined;
    switch (def.type) {
      case "string":
        return this.guard(`typeof ${x} === "string"`, x);
      case "number":
        return this.guard(`typeof ${x} === "number" && Number.isFinite(${x})`, x);
      case "boolean":
        return this.guard(`typeof ${x} === "boolean"`, x);
      case "unknown":
      case "any":
        return x;
      case "literal":
      case "enum":
        return node._zod.values && this.guard(`${this.ref(node._zod.values)}.has(${x})`, x);
      case "nullable":
        return this.wrapped(node, x, path, `${x} === null`, "null");
      case "optional":
        return node._zod.def.innerType?._zod.optin === "defaulted"
          ? undefined
          : this.wrapped(node, x, path, `${x} === undefined`, "undefined");
      case "default":
        return this.defaulted(node, x, path);
      case "object":
        return this.object(node, x, path);
      case "array":
        return this.array(node, x, path);
      default:
        return undefined;
    }
  }

  private guard(test: string, x: string): string {
    this.emit(`if (!(${test})) return I;`);
    return x;
  }

  /** A nullable or optional: `shortcut` when `test` holds, else what it wraps. */
  private wrapped(node: Node, x: string, path: string, test: string, shortcut: string) {
    const inner = node._zod.def.innerType;
    if (inner === undefined) return undefined;
    const out = this.fresh();
    this.emit(`let ${out} = ${shortcut};`);
    this.emit(`if (!(${test})) {`);
    this.emit(`${out} = ${this.node(inner, x, path)};`);
    this.emit("}");
    return out;
  }

  /** A default: its value for `undefined` in or out (read from the def each time, as zod does). */
  private defaulted(node: Node, x: string, path: string): string | undefined {
    const inner = node._zod.def.innerType;
    if (inner === undefined) return undefined;
    const def = this.ref(node._zod.def);
    const out = this.fresh();
    this.emit(`let ${out} = undefined;`);
    this.emit(`if (${x} !== undefined) {`);
    this.emit(`${out} = ${this.node(inner, x, path)};`);
    this.emit("}");
    this.emit(`if (${out} === undefined) ${out} = ${def}.defaultValue;`);
    return out;
  }

  /**
   * An object as zod's compiled object parser reads it (zod/v4/core's `$ZodObjectJIT`): keys in
   * the shape's order, unknown keys dropped; a required key must be present; an absent optional
   * key stays absent; a defaulted key is always set.
   */
  private object(node: Node, x: string, path: string): string | undefined {
    const { shape, catchall } = node._zod.def;
    if (shape === undefined || catchall !== undefined) return undefined;
    const keys = Object.keys(shape);
    if (!keys.every((key) => covered(key, shape[key] as Node))) return undefined;
    this.emit(`if (typeof ${x} !== "object" || ${x} === null || Array.isArray(${x})) return I;`);
    const out = this.fresh();
    this.emit(`const ${out} = {};`);
    for (const key of keys)
      this.field(out, x, key, shape[key] as Node, path ? `${path}.${key}` : key);
    return out;
  }

  /** An array as zod's runtime parses one: each element in turn, into a new array. */
  private array(node: Node, x: string, path: string): string | undefined {
    const { element } = node._zod.def;
    if (element === undefined) return undefined;
    this.emit(`if (!Array.isArray(${x})) return I;`);
    const out = this.fresh();
    const i = this.fresh();
    const item = this.fresh();
    this.emit(`const ${out} = new Array(${x}.length);`);
    this.emit(`for (let ${i} = 0; ${i} < ${x}.length; ${i}++) {`);
    this.emit(`const ${item} = ${x}[${i}];`);
    this.emit(`${out}[${i}] = ${this.node(element, item, `${path}[]`)};`);
    this.emit("}");
    return out;
  }

  private field(out: string, x: string, key: string, child: Node, path: string): void {
    const k = JSON.stringify(key);
    const value = this.fresh();
    const { optin, optout } = child._zod;
    this.emit(`const ${value} = ${x}[${k}];`);
    if (optin === undefined) this.emit(`if (!(${k} in ${x})) return I;`);
    const optional = optin !== undefined && optout === "optional";
    if (optional) this.emit(`if (${k} in ${x}) {`);
    this.emit(`${out}[${k}] = ${this.node(child, value, path)};`);
    if (!optional) return;
    // zod drops an absent optional key, unless its schema fills it in (an optional default).
    if (optin === "defaulted") {
      this.emit("} else {");
      const absent = this.island(child, "undefined", path);
      this.emit(`if (${absent} !== undefined) ${out}[${k}] = ${absent};`);
    }
    this.emit("}");
  }
}

/** Keys and key schemas the object code covers: not `__proto__`, and optional in only if out. */
function covered(key: string, child: Node): boolean {
  const { optin, optout } = child._zod;
  return key !== "__proto__" && !(optin === "optional" && optout !== "optional");
}
