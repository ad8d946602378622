import { describe, expect, it } from "vitest";
import * as mini from "zod/mini";
import * as z from "../../schemas/zod";

const traits = (schema: { _zod: unknown }) => [...(schema._zod as { traits: Set<string> }).traits];

describe("schemas/zod", () => {
  it("builds objects with the compiled parser, and extend, pick and omit keep it", () => {
    const base = z.object({ a: z.string(), b: z.optional(z.number()) });
    for (const schema of [
      base,
      z.extend(base, { c: z.boolean() }),
      z.pick(base, { a: true }),
      z.omit(base, { b: true }),
      z.strictObject({ s: z.string() }),
      z.looseObject({ l: z.string() }),
    ]) {
      expect(traits(schema)).toEqual(
        expect.arrayContaining(["ZodMiniObject", "$ZodObjectJIT", "$ZodObject"]),
      );
    }
    expect(Object.keys(z.extend(base, { c: z.boolean() }).shape)).toEqual(["a", "b", "c"]);
  });

  it("parses as zod/mini's objects do: unknown keys stripped, refused or kept", () => {
    expect(z.object({ a: z.string() }).parse({ a: "x", extra: 1 })).toEqual({ a: "x" });
    expect(z.looseObject({ a: z.string() }).parse({ a: "x", extra: 1 })).toEqual({
      a: "x",
      extra: 1,
    });
    const strict = z.strictObject({ a: z.string() }).safeParse({ a: "x", extra: 1 });
    expect(strict.error?.issues[0]?.message).toBe('Unrecognized key: "extra"');
    const wrong = z.object({ a: z.string() }, "not a thing").safeParse(42);
    expect(wrong.error?.issues[0]?.message).toBe("not a thing");
    expect(z.object({ a: z.string() }).safeParse({ a: 1 }).error?.issues[0]).toMatchObject({
      path: ["a"],
      message: "Invalid input: expected string, received number",
    });
  });

  it("exports every name of zod/mini's, listed (a star re-export would defeat bundlers' shaking)", () => {
    const missing = Object.keys(mini).filter(
      (name) => name !== "default" && name !== "z" && !(name in z),
    );
    expect(missing).toEqual([]);
  });
});
