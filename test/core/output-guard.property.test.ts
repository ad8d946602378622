import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  guardOutput,
  type OutputGuardContext,
  type OutputGuardKind,
  RAW_SPAN_CHARS,
  refusalReason,
  withheld,
} from "../../functions/core/output-guard";

/**
 * The output guard as properties: generated ids, keys, other customers' data and tool output
 * embedded in random prose are found, with the right kind, span and verdict, and never survive in
 * the redacted text; ordinary prose with numbers, amounts and dates passes (the negative control:
 * a guard that flagged anything with digits would fail it, one that flagged nothing would fail
 * every other property).
 */

const WORDS = [
  "your",
  "refund",
  "was",
  "sent",
  "on",
  "the",
  "parcel",
  "arrives",
  "within",
  "days",
  "thanks",
  "for",
  "waiting",
  "we",
  "checked",
  "order",
  "and",
  "it",
  "is",
  "delivered",
  "total",
  "of",
  "items",
  "size",
  "from",
  "at",
  "sorry",
];

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

const chars = (alphabet: string, length: number) =>
  fc
    .array(fc.constantFrom(...alphabet), { minLength: length, maxLength: length })
    .map((a) => a.join(""));

/** A word, a small number, an amount or a date: what an answer is made of. */
const proseToken = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...WORDS) },
  fc.integer({ min: 0, max: 99_999 }).map(String),
  fc
    .tuple(fc.integer({ min: 1, max: 9999 }), fc.integer({ min: 0, max: 99 }))
    .map(([a, c]) => `${a}.${String(c).padStart(2, "0")} EUR`),
  fc
    .date({ min: new Date("2000-01-01"), max: new Date("2099-12-31"), noInvalidDate: true })
    .map((d) => d.toISOString().slice(0, 10)),
  fc
    .date({ min: new Date("2000-01-01"), max: new Date("2099-12-31"), noInvalidDate: true })
    .map((d) => d.toISOString()),
  fc.integer({ min: 0, max: 23 }).map((h) => `${h}:30`),
);

/** Ordinary prose: words, numbers, amounts and dates, a word between any two numbers. */
const prose = fc
  .array(proseToken, { minLength: 0, maxLength: 30 })
  .map((tokens) =>
    tokens
      .flatMap((t, i) =>
        i > 0 && /^\d/.test(t) && /\d$/.test(tokens[i - 1] ?? "") ? ["and", t] : [t],
      )
      .join(" "),
  )
  .map((text) => text.replaceAll(/\border\s+(?=\d)/gi, "order of "));

interface Planted {
  readonly value: string;
  readonly kind: OutputGuardKind;
  readonly context?: OutputGuardContext;
}

const ulid = fc.tuple(fc.constantFrom(..."01234567"), chars(CROCKFORD, 25)).map(([a, b]) => a + b);

const internalIds: fc.Arbitrary<Planted> = fc.oneof(
  ulid.map((value) => ({ value, kind: "internal_id" as const })),
  fc.uuid().map((value) => ({ value, kind: "internal_id" as const })),
  fc
    .tuple(fc.constantFrom("task", "corr", "conv", "rrun", "evt", "msg", "refund"), ulid)
    .map(([prefix, body]) => ({ value: `${prefix}_${body}`, kind: "internal_id" as const })),
  fc.stringMatching(/^[a-z]{3,10}$/).map((name) => ({
    value: `cust_${name}`,
    kind: "internal_id" as const,
    context: { internalIds: [`cust_${name}`] },
  })),
);

const secrets: fc.Arbitrary<Planted> = fc.oneof(
  chars(UPPER_DIGITS, 16).map((body) => ({ value: `AKIA${body}`, kind: "secret" as const })),
  chars(BASE64, 40)
    .filter((t) => /[a-z]/.test(t) && /[A-Z]/.test(t) && /\d/.test(t))
    .map((value) => ({ value, kind: "secret" as const })),
  fc
    .tuple(
      chars(BASE64.slice(0, 62), 20),
      chars(BASE64.slice(0, 62), 30),
      chars(BASE64.slice(0, 62), 20),
    )
    .map(([a, b, c]) => ({ value: `eyJ${a}.eyJ${b}.${c}`, kind: "secret" as const })),
  fc
    .tuple(
      fc.constantFrom("dynamodb", "kms", "sqs"),
      fc.stringMatching(/^\d{12}$/),
      fc.stringMatching(/^[a-z][a-z-]{2,20}$/),
    )
    .map(([service, account, name]) => ({
      value: `arn:aws:${service}:eu-west-1:${account}:table/${name}`,
      kind: "secret" as const,
    })),
  fc.stringMatching(/^[a-z]{3,8}$/).map((stage) => ({
    value: `agentbus-${stage}-state`,
    kind: "secret" as const,
  })),
);

const otherCustomers: fc.Arbitrary<Planted> = fc.oneof(
  fc
    .tuple(fc.stringMatching(/^[a-z]{2,10}$/), fc.stringMatching(/^[a-z]{2,10}$/))
    .map(([user, host]) => ({
      value: `${user}@${host}.com`,
      kind: "other_customer_data" as const,
    })),
  fc
    .tuple(
      fc.integer({ min: 10, max: 99 }),
      fc.integer({ min: 1000, max: 9999 }),
      fc.integer({ min: 1000, max: 9999 }),
    )
    .map(([a, b, c]) => ({ value: `+44 ${a} ${b} ${c}`, kind: "other_customer_data" as const })),
  fc.integer({ min: 100, max: 99_999 }).map((n) => ({
    value: `order ${n}`,
    kind: "other_customer_data" as const,
  })),
);

const toolRecord = fc.record({
  order_id: fc.stringMatching(/^[A-Z]-\d{4}$/),
  status: fc.constantFrom("delivered", "shipped", "returned"),
  item: fc.constantFrom("Wireless earbuds", "Desk lamp", "Rain jacket, size M"),
  total_cents: fc.integer({ min: 100, max: 100_000 }),
});

const rawOutputs: fc.Arbitrary<Planted> = fc.oneof(
  toolRecord.map((record) => ({
    value: JSON.stringify(record),
    kind: "raw_tool_output" as const,
  })),
  // A copy of the tool's output without its braces: found by the copy, not by the JSON shape.
  toolRecord.map((record) => {
    const json = JSON.stringify(record);
    return {
      value: json.slice(1, -1),
      kind: "raw_tool_output" as const,
      context: { toolOutputs: [json] },
    };
  }),
);

/** `planted` between two runs of prose, with a space each side. */
const embedded = (planted: fc.Arbitrary<Planted>) =>
  fc.tuple(prose, planted, prose).map(([before, p, after]) => {
    const head = before === "" ? "" : `${before} `;
    return { text: `${head}${p.value} ${after}`, start: head.length, planted: p };
  });

/** How many times `value` occurs in `text`. */
const occurrences = (text: string, value: string) => text.split(value).length - 1;

function expectFound(kind: OutputGuardKind, verdict: "redact" | "refuse") {
  return ({ text, start, planted }: { text: string; start: number; planted: Planted }) => {
    const result = guardOutput(text, planted.context);
    const end = start + planted.value.length;
    const covering = result.findings.find((f) => f.start <= start + 1 && f.end >= end - 1);
    expect(covering, `${planted.value} in ${text}`).toBeDefined();
    expect(covering?.kind).toBe(kind);
    expect(result.verdict).toBe(verdict);
    // The planted copy is gone; the prose around it may hold the same digits by chance.
    expect(occurrences(result.redacted, planted.value)).toBeLessThan(
      occurrences(text, planted.value),
    );
    expect(result.redacted).toContain(withheld(kind));
  };
}

describe("output guard: what it finds", () => {
  it("finds internal ids and redacts them", () => {
    fc.assert(fc.property(embedded(internalIds), expectFound("internal_id", "redact")), {
      numRuns: 300,
    });
  });

  it("finds keys and secrets and refuses the text", () => {
    fc.assert(fc.property(embedded(secrets), expectFound("secret", "refuse")), { numRuns: 300 });
  });

  it("finds another customer's e-mail, phone and order id and refuses the text", () => {
    fc.assert(
      fc.property(embedded(otherCustomers), ({ text, start, planted }) => {
        // The order id is what is found of `order 456`, not the word before it.
        const value = planted.value.replace(/^order /, "");
        const offset = planted.value.length - value.length;
        expectFound(
          "other_customer_data",
          "refuse",
        )({
          text,
          start: start + offset,
          planted: { ...planted, value },
        });
      }),
      { numRuns: 300 },
    );
  });

  it("finds raw tool output, a JSON object or a long copy, and refuses the text", () => {
    fc.assert(fc.property(embedded(rawOutputs), expectFound("raw_tool_output", "refuse")), {
      numRuns: 300,
    });
  });

  it("a refusal's reason names the kinds and spans, never what was found", () => {
    fc.assert(
      fc.property(embedded(fc.oneof(secrets, otherCustomers)), ({ text, planted }) => {
        const result = guardOutput(text, planted.context);
        const reason = refusalReason(result);
        expect(reason).toMatch(/^output_guard\.refused: /);
        expect(reason).toContain(planted.kind);
        expect(reason).not.toContain(planted.value.replace(/^order /, ""));
      }),
      { numRuns: 200 },
    );
  });
});

describe("output guard: what it lets through", () => {
  it("passes ordinary prose with numbers, amounts and dates (the negative control)", () => {
    fc.assert(
      fc.property(prose, (text) => {
        const result = guardOutput(text);
        expect(result.findings).toEqual([]);
        expect(result.verdict).toBe("pass");
        expect(result.redacted).toBe(text);
      }),
      { numRuns: 1000 },
    );
  });

  it("the negative control fails a guard that flags every number", () => {
    // The same prose, judged by a guard that takes any number for an id: some sample fails.
    const flagsNumbers = (text: string) => /\d/.test(text);
    const failed = fc.check(
      fc.property(prose, (text) => !flagsNumbers(text)),
      { numRuns: 200, seed: 7 },
    );
    expect(failed.failed).toBe(true);
  });

  it("lets the text name the customer's own order and refund, and quote what they wrote", () => {
    fc.assert(
      fc.property(prose, fc.integer({ min: 100, max: 99_999 }), ulid, (text, order, refund) => {
        const id = String(order);
        const refundId = `refund_${refund}`;
        const email = "me@example.com";
        const reply = `${text} Your order ${id} was refunded under ${refundId}. You wrote from ${email}.`;
        const result = guardOutput(reply, {
          mayName: [id, refundId],
          customerWrote: [`Please refund order ${id}, I am ${email}`],
        });
        expect(result.findings).toEqual([]);
        expect(result.verdict).toBe("pass");
      }),
      { numRuns: 300 },
    );
  });

  it("lets the text quote one value of a tool output, however long", () => {
    const item = "Wireless noise-cancelling headphones with a travel case, black";
    const output = JSON.stringify({ order_id: "A-1002", item, status: "delivered" });
    expect(item.length).toBeGreaterThan(RAW_SPAN_CHARS);
    const result = guardOutput(`Your "${item}" was delivered.`, { toolOutputs: [output] });
    expect(result.verdict).toBe("pass");
    const pasted = guardOutput(`Record: ${output.slice(1, -1)}.`, { toolOutputs: [output] });
    expect(pasted.verdict).toBe("refuse");
    expect(pasted.findings.map((f) => f.kind)).toEqual(["raw_tool_output"]);
  });
});
