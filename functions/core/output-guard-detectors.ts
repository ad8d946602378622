/**
 * What the output guard (./output-guard.ts) looks for, before exemptions and overlaps are
 * settled: each candidate with its kind, span, shape and text. Patterns by shape first, then
 * what only the step's context tells (its own ids, other customers' values, its tool outputs).
 */

export const OUTPUT_GUARD_KINDS = [
  "internal_id",
  "secret",
  "raw_tool_output",
  "other_customer_data",
] as const;
export type OutputGuardKind = (typeof OUTPUT_GUARD_KINDS)[number];

/** The least length of a verbatim copy of a tool output that counts as raw tool output. */
export const RAW_SPAN_CHARS = 40;

/** What the step knows, that tells a leak from an answer. Every field may be left out. */
export interface OutputGuardContext {
  /** The step's own ids (task, run, correlation, conversation, customer, events): never shown. */
  readonly internalIds?: readonly string[];
  /** What the text may name: the customer's own order id, their refund's id. */
  readonly mayName?: readonly string[];
  /** What the customer wrote (their messages): their own words are no leak when quoted back. */
  readonly customerWrote?: readonly string[];
  /** The tool outputs the model saw in this run, as the tools gave them (JSON or text). */
  readonly toolOutputs?: readonly string[];
  /** What the step knows of other customers: their e-mail addresses, phones, order ids. */
  readonly otherCustomers?: readonly string[];
}

export interface GuardCandidate {
  readonly kind: OutputGuardKind;
  readonly start: number;
  readonly end: number;
  readonly what: string;
  readonly text: string;
}

interface Shape {
  readonly kind: OutputGuardKind;
  readonly what: string;
  readonly pattern: RegExp;
  /** What of a match is the thing (its start), or undefined when none is (a date, not a phone). */
  readonly accept?: (match: string) => string | undefined;
}

const ULID_BODY = "[0-7][0-9A-HJKMNP-TV-Z]{25}";
/** The prefixes of the hub's opaque ids (`task_...`, `rrun_...`: schemas/ids.ts). */
const HUB_PREFIXES = "task|corr|conv|cust|rrun|arun|agrun|srun|strun|run|evt|call|opact|user|dag";

const SHAPES: readonly Shape[] = [
  {
    kind: "secret",
    what: "AWS access key id",
    pattern: /\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}\b/g,
  },
  { kind: "secret", what: "JWT", pattern: /\beyJ[\w-]{4,}\.[\w-]{4,}\.[\w-]*/g },
  {
    kind: "secret",
    what: "ARN",
    pattern: /\barn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:(?:\d{12})?:[^\s"'<>),;]+/g,
  },
  { kind: "secret", what: "private key", pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----/g },
  {
    kind: "secret",
    what: "key assignment",
    pattern:
      /\b(?:password|passwd|secret|api[_-]?key|access[_-]?key|secret[_-]?key|token)\s*[:=]\s*["']?[^\s"',;]{6,}/gi,
  },
  {
    kind: "secret",
    what: "provider key",
    pattern:
      /\b(?:(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[\w-]{35})/g,
  },
  { kind: "secret", what: "KMS alias", pattern: /\balias\/[\w/-]+/g },
  { kind: "secret", what: "resource name", pattern: /\bagentbus-[a-z0-9]+-[a-z0-9][a-z0-9.-]*/g },
  {
    kind: "secret",
    what: "secret-looking token",
    pattern: /(?<![\w+/])[A-Za-z0-9+/]{32,}={0,2}(?![\w+/])/g,
    accept: (token) =>
      /[a-z]/.test(token) && /[A-Z]/.test(token) && /\d/.test(token) ? token : undefined,
  },
  { kind: "secret", what: "hex token", pattern: /\b[0-9a-fA-F]{32,}\b/g },
  {
    kind: "internal_id",
    what: "id",
    pattern: new RegExp(`\\b(?:[a-z][a-z0-9]{0,15}_)?${ULID_BODY}\\b`, "g"),
  },
  {
    kind: "internal_id",
    what: "UUID",
    pattern: /\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b/g,
  },
  {
    kind: "internal_id",
    what: "id",
    pattern: new RegExp(`\\b(?:${HUB_PREFIXES})_[A-Za-z0-9-]+`, "g"),
  },
  {
    kind: "other_customer_data",
    what: "e-mail address",
    pattern: /[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g,
  },
  {
    kind: "other_customer_data",
    what: "phone number",
    pattern: /(?<![\w.-])\+?(?:\(\d{1,5}\)[ .-]?)?\d[\d .-]*\d(?![\w-])/g,
    accept: phoneNumberIn,
  },
];

/**
 * 9 to 15 digits, not a date (`2026-08-31 09`); without a `+` or an area code in brackets, in at
 * most four groups, one of three digits or more (`38 39 40 41 42`, a list of sizes, is none).
 */
function isPhoneNumber(match: string): boolean {
  const digits = match.replace(/\D/g, "").length;
  if (digits < 9 || digits > 15) return false;
  if (/\d{4}-\d{2}-\d{2}|\d{2}\.\d{2}\.\d{4}/.test(match)) return false;
  if (/^[+(]/.test(match)) return true;
  const groups = match.split(/[ .-]+/);
  return groups.length <= 4 && groups.some((g) => g.length >= 3);
}

/**
 * The longest run of the digit groups a match begins with that is a phone number: a number
 * followed by a date (`+44 20 7946 0958 2026-08-31`) is one, without the date.
 */
function phoneNumberIn(match: string): string | undefined {
  const ends = [...match.matchAll(/\d(?=[ .-]|$)/g)].map((m) => (m.index ?? 0) + 1);
  for (const end of ends.reverse())
    if (isPhoneNumber(match.slice(0, end))) return match.slice(0, end);
  return undefined;
}

/** `order 456`, `order #A-1002`, `order number 789`: the id, 3 to 20 characters with a digit. */
const ORDER_REFERENCE =
  /\border(?:s)?(?:\s+(?:number|no\.?))?\s*#?\s*(?=[A-Za-z0-9-]*\d)([A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)/gi;

export function findCandidates(text: string, context: OutputGuardContext): GuardCandidate[] {
  return [
    ...byShape(text),
    ...orderReferences(text),
    ...exactly(text, context.internalIds ?? [], "internal_id", "the step's own id"),
    ...exactly(text, context.otherCustomers ?? [], "other_customer_data", "another customer's"),
    ...jsonObjects(text),
    ...copiedOutput(text, context.toolOutputs ?? []),
  ];
}

function byShape(text: string): GuardCandidate[] {
  const found: GuardCandidate[] = [];
  for (const { kind, what, pattern, accept } of SHAPES)
    for (const match of text.matchAll(pattern)) {
      const start = match.index ?? 0;
      const value = accept ? accept(match[0]) : match[0];
      if (value === undefined) continue;
      found.push({ kind, what, start, end: start + value.length, text: value });
    }
  return found;
}

function orderReferences(text: string): GuardCandidate[] {
  const found: GuardCandidate[] = [];
  for (const match of text.matchAll(ORDER_REFERENCE)) {
    const id = match[1] ?? "";
    // Longer is an id of another shape (a ULID, a UUID); a date is no order.
    if (id.length < 3 || id.length > 20 || /^\d{4}-\d{2}-\d{2}/.test(id)) continue;
    const start = (match.index ?? 0) + match[0].length - id.length;
    found.push({
      kind: "other_customer_data",
      what: "order id",
      start,
      end: start + id.length,
      text: id,
    });
  }
  return found;
}

/** Every whole-word occurrence of each of `values` (values under 3 characters are left out). */
function exactly(
  text: string,
  values: readonly string[],
  kind: OutputGuardKind,
  what: string,
): GuardCandidate[] {
  const found: GuardCandidate[] = [];
  for (const value of new Set(values)) {
    if (value.length < 3) continue;
    let at = text.indexOf(value);
    while (at >= 0) {
      const end = at + value.length;
      if (!isWordChar(text[at - 1]) && !isWordChar(text[end]))
        found.push({ kind, what, start: at, end, text: value });
      at = text.indexOf(value, at + 1);
    }
  }
  return found;
}

function isWordChar(c: string | undefined): boolean {
  return c !== undefined && /[\w-]/.test(c);
}

/** A JSON object written out: `{` to its matching `}` with a `"key":` inside. */
function jsonObjects(text: string): GuardCandidate[] {
  const found: GuardCandidate[] = [];
  let from = text.indexOf("{");
  while (from >= 0) {
    const end = closingBrace(text, from);
    if (end !== undefined && /"[^"\\]*"\s*:/.test(text.slice(from, end))) {
      found.push({
        kind: "raw_tool_output",
        what: "JSON object",
        start: from,
        end,
        text: text.slice(from, end),
      });
      from = text.indexOf("{", end);
    } else from = text.indexOf("{", from + 1);
  }
  return found;
}

/** The end (exclusive) of the object opened at `open`, strings skipped; undefined when unclosed. */
function closingBrace(text: string, open: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return i + 1;
  }
  return undefined;
}

/** The most of the tool outputs looked at for copies (the rest is not). */
const TOOL_OUTPUT_LIMIT = 256 * 1024;

/**
 * Spans of RAW_SPAN_CHARS or more copied verbatim from a tool output, except those inside one of
 * the output's string values (an item's name, a status text the text may quote).
 */
function copiedOutput(text: string, outputs: readonly string[]): GuardCandidate[] {
  if (text.length < RAW_SPAN_CHARS || outputs.length === 0) return [];
  const windows = windowsByHash(text);
  const copied = new Set<number>();
  const values: string[] = [];
  let budget = TOOL_OUTPUT_LIMIT;
  for (const output of outputs) {
    const seen = output.slice(0, Math.max(0, budget));
    budget -= seen.length;
    const before = copied.size;
    rollWindows(seen, (hash, at) => {
      for (const start of windows.get(hash) ?? [])
        if (seen.startsWith(text.slice(start, start + RAW_SPAN_CHARS), at)) copied.add(start);
    });
    if (copied.size > before) values.push(...stringValues(seen));
  }
  return copiedSpans([...copied].sort((a, b) => a - b))
    .filter(([start, end]) => !values.some((v) => v.includes(unquoted(text.slice(start, end)))))
    .map(([start, end]) => ({
      kind: "raw_tool_output",
      what: "copy of a tool output",
      start,
      end,
      text: text.slice(start, end),
    }));
}

/** The starts of the text's windows of RAW_SPAN_CHARS, by their rolling hash. */
function windowsByHash(text: string): Map<number, number[]> {
  const windows = new Map<number, number[]>();
  rollWindows(text, (hash, at) => {
    const starts = windows.get(hash);
    if (starts) starts.push(at);
    else windows.set(hash, [at]);
  });
  return windows;
}

const BASE = 31;
/** BASE to the power RAW_SPAN_CHARS - 1, in 32 bits: what the character leaving a window weighed. */
const LEAVING = Array.from({ length: RAW_SPAN_CHARS - 1 }).reduce<number>(
  (p) => Math.imul(p, BASE),
  1,
);

/** Calls `each` with the hash and start of every window of RAW_SPAN_CHARS of `text`. */
function rollWindows(text: string, each: (hash: number, at: number) => void): void {
  let hash = 0;
  for (let i = 0; i < text.length; i++) {
    if (i >= RAW_SPAN_CHARS)
      hash = (hash - Math.imul(text.charCodeAt(i - RAW_SPAN_CHARS), LEAVING)) | 0;
    hash = (Math.imul(hash, BASE) + text.charCodeAt(i)) | 0;
    if (i >= RAW_SPAN_CHARS - 1) each(hash, i - RAW_SPAN_CHARS + 1);
  }
}

/** A span without the quotes, spaces and JSON punctuation at its ends. */
function unquoted(span: string): string {
  return span.replace(/^[\s"',:{}[\]]+|[\s"',:{}[\]]+$/g, "");
}

/** The maximal spans made of the windows starting at `starts` (sorted). */
function copiedSpans(starts: readonly number[]): [number, number][] {
  const spans: [number, number][] = [];
  for (const i of starts) {
    const last = spans.at(-1);
    if (last && i <= last[1]) last[1] = i + RAW_SPAN_CHARS;
    else spans.push([i, i + RAW_SPAN_CHARS]);
  }
  return spans;
}

/** The string values of a JSON text (none when it is not JSON: then it is all one text). */
function stringValues(output: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(output);
  } catch {
    return [];
  }
  const strings: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === "string") strings.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === "object") Object.values(v).forEach(walk);
  };
  walk(value);
  return strings;
}
