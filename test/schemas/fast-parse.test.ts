import fc from "fast-check";
import { describe, expect, it } from "vitest";
import * as zm from "zod/mini";
// The reference applications' event types too (their modules define them).
import "../../functions/roles/modules";
import { registry } from "../../schemas";
import { fastParserOf, INVALID } from "../../schemas/fast-parse";
import * as z from "../../schemas/zod";
import { arbitraryOf, mutated, ordered } from "../support/zod-arbitrary";

/**
 * The fast parser may only ever answer as zod's runtime does: the same verdict, and for a valid
 * value the same output, key order and absent-or-undefined keys included. It answers INVALID for
 * everything the runtime rejects, and the registry then asks the runtime for the error.
 */
function expectSameAnswer(schema: z.ZodMiniType, value: unknown): boolean {
  const parse = fastParserOf(schema).parse;
  if (parse === undefined) throw new Error("no fast parser for this schema");
  const fast = parse(value);
  const runtime = z.safeParse(schema, value);
  expect(fast === INVALID ? "invalid" : "valid").toBe(runtime.success ? "valid" : "invalid");
  if (runtime.success) expect(ordered(fast)).toEqual(ordered(runtime.data));
  return runtime.success;
}

const DEFINITIONS = registry.definitions();
const schemaOf = (type: string, version: number) => {
  const schema = registry.envelopeSchema(type, version);
  if (!schema) throw new Error(`no schema for ${type}@${version}`);
  return schema;
};

describe("the fast parser of every registered envelope schema", () => {
  it("is generated, and leaves none of the envelope's own fields to zod's runtime", () => {
    for (const { type, schemaVersion } of DEFINITIONS) {
      const { parse, islands } = fastParserOf(schemaOf(type, schemaVersion));
      expect(parse, `${type}@${schemaVersion}`).toBeTypeOf("function");
      for (const island of islands) expect(island).toMatch(/^payload\./);
    }
  });

  it.each(
    DEFINITIONS.map((d) => [`${d.type}@${d.schemaVersion}`, d.type, d.schemaVersion] as const),
  )("answers as zod's runtime on generated and broken messages of %s", (_, type, version) => {
    const schema = schemaOf(type, version);
    const valid = arbitraryOf(schema);
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof(valid, mutated(valid)), (value) => {
        if (expectSameAnswer(schema, value)) accepted++;
      }),
      { numRuns: 60 },
    );
    // The generated messages reach the success path, where a wrong answer would matter.
    expect(accepted).toBeGreaterThan(0);
  });
});

describe("the fast parser's reading of zod's semantics", () => {
  const answers = (schema: z.ZodMiniType, values: readonly unknown[]) => {
    for (const value of values) expectSameAnswer(schema, value);
  };

  it("keeps an optional key given as undefined, drops an absent one, and drops unknown keys", () => {
    const schema = z.object({ a: z.optional(z.string()), b: z.string() });
    answers(schema, [{ b: "x" }, { a: undefined, b: "x" }, { a: "y", b: "x", c: 1 }, { a: 1 }]);
    // A required key whose schema takes anything must still be there.
    answers(z.object({ v: z.unknown() }), [{}, { v: undefined }, { v: 1 }]);
    expect(Object.keys(fastParserOf(schema).parse?.({ c: 1, b: "x", a: "y" }) as object)).toEqual([
      "a",
      "b",
    ]);
  });

  it("fills defaults, also under an optional, and keeps the shape's key order", () => {
    const schema = z.object({
      n: z._default(z.int(), 1),
      o: z.optional(z._default(z.string(), "d")),
      s: z.nullable(z.string()),
    });
    answers(schema, [{ s: null }, { s: "x", n: 2, o: "e" }, { o: undefined, s: null }, {}]);
  });

  it("runs checks as zod does: bounds, patterns, refinements, and checks that rewrite", () => {
    const schema = z.object({
      id: z.string().check(z.regex(/^[a-z]+$/), z.maxLength(4)),
      even: z.int().check(z.refine((n) => n % 2 === 0)),
      name: z.string().check(z.trim(), z.minLength(1)),
      at: z.iso.datetime(),
    });
    answers(schema, [
      { id: "abc", even: 2, name: "  x ", at: "2026-12-02T00:00:00Z" },
      { id: "abcde", even: 2, name: "x", at: "2026-12-02T00:00:00Z" },
      { id: "abc", even: 3, name: "x", at: "2026-12-02T00:00:00Z" },
      { id: "abc", even: 2, name: "   ", at: "2026-12-02T00:00:00Z" },
      { id: "abc", even: 2, name: "x", at: "yesterday" },
      { id: "abc", even: 2.5, name: "x", at: "2026-12-02T00:00:00Z" },
    ]);
  });

  it("parses arrays, enums and literals, and leaves records and unions to zod's runtime", () => {
    const schema = z.object({
      tags: z.array(z.enum(["a", "b"])).check(z.maxLength(2)),
      kind: z.literal("k"),
      extra: z.record(z.string(), z.number()),
      either: z.union([z.string(), z.number()]),
    });
    expect(fastParserOf(schema).islands).toEqual(["extra", "either"]);
    answers(schema, [
      { tags: ["a"], kind: "k", extra: { x: 1 }, either: 1 },
      { tags: ["a", "b", "a"], kind: "k", extra: {}, either: "s" },
      { tags: ["c"], kind: "k", extra: {}, either: 1 },
      { tags: [], kind: "k", extra: { x: "1" }, either: 1 },
      { tags: [], kind: "k", extra: {}, either: null },
    ]);
  });

  it("leaves a schema that contains itself to zod's runtime where it recurs", () => {
    // zod/mini's own object: schemas/zod.ts builds its objects' parsers eagerly.
    const Category: zm.ZodMiniObject = zm.object({
      name: z.string(),
      get children() {
        return z.array(Category);
      },
    });
    expect(fastParserOf(Category).islands).toEqual(["children[]"]);
    answers(Category, [
      { name: "a", children: [] },
      { name: "a", children: [{ name: "b", children: [{ name: "c", children: [] }] }] },
      { name: "a", children: [{ name: 1, children: [] }] },
    ]);
  });

  it("generates nothing for a schema it covers no part of", () => {
    expect(fastParserOf(z.union([z.string(), z.number()])).parse).toBeUndefined();
    expect(fastParserOf(z.string()).parse).toBeTypeOf("function");
  });
});
