import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { utf8Bytes } from "../../schemas/envelope";
import { jsonBytesAtMost } from "../../schemas/json-size";

describe("jsonBytesAtMost: a bound of a message's size without serializing it", () => {
  it("is never below the UTF-8 bytes of JSON.stringify, for any JSON value", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const exact = utf8Bytes(JSON.stringify(value) ?? "");
        const bound = jsonBytesAtMost(value, Number.MAX_SAFE_INTEGER);
        expect(bound).toBeGreaterThanOrEqual(exact);
      }),
      { numRuns: 2_000 },
    );
  });

  it("holds for escapes, surrogate pairs, undefined members and numbers at their longest", () => {
    const value = {
      control: "\u0000\u001f\u0007",
      quotes: '"\\"',
      emoji: "😀😀",
      cjk: "订单已发货",
      gone: undefined,
      list: [
        undefined,
        null,
        -1.2345678901234567e-308,
        -0.0000010090086662345441,
        Number.MAX_VALUE,
        true,
      ],
    };
    const exact = utf8Bytes(JSON.stringify(value));
    expect(jsonBytesAtMost(value, Number.MAX_SAFE_INTEGER)).toBeGreaterThanOrEqual(exact);
    // The longest numbers alone: fixed notation with 17 digits below 1e-5 is 25 characters.
    for (const n of [-0.0000010090086662345441, -1.2345678901234567e-308, -Number.MAX_VALUE])
      expect(jsonBytesAtMost(n, Number.MAX_SAFE_INTEGER)).toBeGreaterThanOrEqual(
        JSON.stringify(n).length,
      );
  });

  it("gives up on what only serializing tells: class instances, bigints, functions, cycles, deep nesting", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    let deep: unknown = "leaf";
    for (let i = 0; i < 100; i++) deep = [deep];
    for (const value of [{ at: new Date(0) }, { n: 1n }, { f: () => 1 }, cyclic, deep])
      expect(jsonBytesAtMost(value, Number.MAX_SAFE_INTEGER)).toBeUndefined();
  });

  it("stops early: past the limit it returns a number past the limit", () => {
    const big = { text: "x".repeat(10_000), more: Array.from({ length: 1_000 }, () => "y") };
    expect(jsonBytesAtMost(big, 100)).toBeGreaterThan(100);
  });
});
