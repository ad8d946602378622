import * as z from "../../schemas/zod";
import { type AttentionRule, type AttentionSignal, operatorCommand } from "./attention";
import {
  findCandidates,
  type GuardCandidate,
  OUTPUT_GUARD_KINDS,
  type OutputGuardContext,
  type OutputGuardKind,
} from "./output-guard-detectors";

export type { OutputGuardContext, OutputGuardKind } from "./output-guard-detectors";
export { OUTPUT_GUARD_KINDS, RAW_SPAN_CHARS } from "./output-guard-detectors";

/**
 * The output guard: one pure check of a text a model wrote before it goes to a customer (a
 * reply, the refund agent's reason). A model's output is untrusted input: it may carry what the
 * model saw but the customer must not, whatever the prompt said. Given what the step knows
 * (`OutputGuardContext`), `guardOutput` finds, each with its kind and span:
 *
 * - `internal_id`: an event, task, run, conversation, customer or aggregate id (a ULID, a UUID, an
 *   id of the hub's shapes, or one of the step's own ids), unless the text may name it (the
 *   customer's own order id, their refund's id: `mayName`);
 * - `secret`: an AWS access key id, a secret-looking token (32 or more characters of mixed case
 *   and digits, or of hex), a JWT, an ARN, a private key, a `password=`/`api_key:` assignment, a
 *   KMS alias or a resource name of the stack (`agentbus-<stage>-...`);
 * - `raw_tool_output`: a JSON object, or a span of RAW_SPAN_CHARS characters or more copied from a
 *   tool output the model saw that is not inside one of its string values (quoting an item's
 *   name is fine, pasting the record is not);
 * - `other_customer_data`: an e-mail address, a phone number (9 to 15 digits, not a date) or an
 *   order id (`order 456`, `order #A-1002`) that is not the customer's, and any value the step
 *   knows to be another customer's (`otherCustomers`).
 *
 * What the customer wrote is no leak when it comes back: a finding whose text occurs in one of
 * their messages (`customerWrote`) is dropped. Of overlapping findings the longest stands (the
 * whole ARN, not the account number in it), then the strictest.
 *
 * The verdict is the strictest of the findings' (VERDICT_OF_KIND): `pass` with none; `redact`
 * when every finding is an internal id (the text is sent with each span replaced: an id tells the
 * customer nothing, the rest of the text still answers them); `refuse` when any is a secret, raw
 * tool output or another customer's data (the text must not go out even in part: a secret is
 * rotated and the step looked at by a person; a paste of tool output or another customer's data
 * says the model mixed up what it saw, so what is left around it cannot be trusted either).
 */

export const OUTPUT_GUARD_VERDICTS = ["pass", "redact", "refuse"] as const;
export type OutputGuardVerdict = (typeof OUTPUT_GUARD_VERDICTS)[number];

/** What a finding of each kind makes of the text. */
export const VERDICT_OF_KIND: Readonly<Record<OutputGuardKind, "redact" | "refuse">> = {
  internal_id: "redact",
  secret: "refuse",
  raw_tool_output: "refuse",
  other_customer_data: "refuse",
};

/** One thing found: its kind, its span in the text (`start` to `end`, exclusive), what it looks like. */
export interface OutputGuardFinding {
  readonly kind: OutputGuardKind;
  readonly start: number;
  readonly end: number;
  /** The shape found ("AWS access key id", "e-mail address"): never the text itself. */
  readonly what: string;
}

export interface OutputGuardResult {
  readonly verdict: OutputGuardVerdict;
  /** In the order of their spans, none overlapping. */
  readonly findings: readonly OutputGuardFinding[];
  /** The text with each finding's span replaced by `withheld(kind)` (the text itself on a pass). */
  readonly redacted: string;
}

/** What stands in the text for a span withheld: `[withheld: internal id]`. */
export function withheld(kind: OutputGuardKind): string {
  return `[withheld: ${kind.replaceAll("_", " ")}]`;
}

/** Guards one text going to a customer (see the comment at the top of this file). */
export function guardOutput(text: string, context: OutputGuardContext = {}): OutputGuardResult {
  const exempt = exemptionOf(context);
  const findings = kept(findCandidates(text, context).filter((c) => !exempt(c.text)));
  const verdict = findings.reduce<OutputGuardVerdict>(
    (worst, f) =>
      VERDICT_OF_KIND[f.kind] === "refuse" ? "refuse" : worst === "pass" ? "redact" : worst,
    "pass",
  );
  return { verdict, findings, redacted: redactedText(text, findings) };
}

/** Whether a candidate's text is one the customer may read: named by the step, or their own words. */
function exemptionOf(context: OutputGuardContext): (found: string) => boolean {
  const named = new Set(context.mayName ?? []);
  const wrote = context.customerWrote ?? [];
  return (found) => named.has(found) || wrote.some((message) => message.includes(found));
}

const SEVERITY: Readonly<Record<OutputGuardKind, number>> = {
  secret: 3,
  other_customer_data: 2,
  raw_tool_output: 1,
  internal_id: 0,
};

/**
 * The candidates that stand, none overlapping, by span: the longest first (an ARN holds an
 * account number, a UUID digit groups, a JSON object ids), then the strictest.
 */
function kept(candidates: readonly GuardCandidate[]): OutputGuardFinding[] {
  const ordered = [...candidates].sort(
    (a, b) =>
      b.end - b.start - (a.end - a.start) ||
      SEVERITY[b.kind] - SEVERITY[a.kind] ||
      a.start - b.start,
  );
  const chosen: OutputGuardFinding[] = [];
  for (const { kind, start, end, what } of ordered)
    if (!chosen.some((c) => start < c.end && c.start < end))
      chosen.push({ kind, start, end, what });
  return chosen.sort((a, b) => a.start - b.start);
}

function redactedText(text: string, findings: readonly OutputGuardFinding[]): string {
  let out = "";
  let at = 0;
  for (const f of findings) {
    out += text.slice(at, f.start) + withheld(f.kind);
    at = f.end;
  }
  return out + text.slice(at);
}

/**
 * What a person is told of a refusal: the kinds and spans found, never the text
 * (`secret (AWS access key id) at 10-30; ...`), at most `limit` characters.
 */
export function describeFindings(findings: readonly OutputGuardFinding[], limit = 900): string {
  const all = findings.map((f) => `${f.kind} (${f.what}) at ${f.start}-${f.end}`).join("; ");
  return all.length <= limit ? all : `${all.slice(0, limit - 1)}…`;
}

/** The reason a text the guard refused is held for a person under: `output_guard.refused: <findings>`. */
export const OUTPUT_GUARD_REFUSED = "output_guard.refused";

export function refusalReason(result: Pick<OutputGuardResult, "findings">): string {
  return `${OUTPUT_GUARD_REFUSED}: ${describeFindings(result.findings)}`;
}

/**
 * The guard's result as an event records it, under OUTPUT_GUARD_FIELD of the payload of the
 * event that carries the guarded text (or says it was held): the verdict and each finding's kind
 * and span. The consumer counts it into its metrics (`OutputGuardVerdict` by `verdict`,
 * `OutputGuardFinding` by `kind`: functions/handlers/consumer-metrics.ts).
 */
export const OutputGuardRecord = z.object({
  verdict: z.enum(OUTPUT_GUARD_VERDICTS),
  findings: z
    .array(
      z.object({
        kind: z.enum(OUTPUT_GUARD_KINDS),
        start: z.int().check(z.nonnegative()),
        end: z.int().check(z.nonnegative()),
      }),
    )
    .check(z.maxLength(200)),
});
export type OutputGuardRecord = z.output<typeof OutputGuardRecord>;

export const OUTPUT_GUARD_FIELD = "output_guard";

/** The record of a guard's result (at most 200 findings kept: the metrics count what is kept). */
export function guardRecord(result: OutputGuardResult): OutputGuardRecord {
  return {
    verdict: result.verdict,
    findings: result.findings.slice(0, 200).map(({ kind, start, end }) => ({ kind, start, end })),
  };
}

/** The guard's record an event carries, or undefined when it carries none (or not one of this shape). */
export function guardRecordOf(event: { readonly payload: unknown }): OutputGuardRecord | undefined {
  const payload = event.payload;
  if (payload === null || typeof payload !== "object") return undefined;
  const parsed = OutputGuardRecord.safeParse(
    (payload as Record<string, unknown>)[OUTPUT_GUARD_FIELD],
  );
  return parsed.success ? parsed.data : undefined;
}

/**
 * Texts the output guard refused: nothing of the model's went to the customer, a person must look
 * (the reply is held, or the run waits), and a secret found must be rotated. Any one alarms.
 */
export const OUTPUT_GUARD_REFUSALS: AttentionSignal = {
  name: "output-guard-refusals",
  metric: "OutputGuardRefused",
  alarm: {
    id: "OutputGuardRefusedAlarm",
    what: "model outputs refused by the output guard",
    why: "a model wrote a secret, raw tool output or another customer's data for a customer; nothing of it was sent",
    act: `Run ${operatorCommand("reply list")} (reason ${OUTPUT_GUARD_REFUSED}), then ${operatorCommand("reply approve <task id> --text <text>")} or ${operatorCommand("reply reject <task id>")}; rotate a secret it names`,
  },
};

/** Every emitted event whose guard record says `refuse` raises OUTPUT_GUARD_REFUSALS. */
export const OUTPUT_GUARD_ATTENTION: AttentionRule = {
  signal: OUTPUT_GUARD_REFUSALS,
  raisedBy: (event) => guardRecordOf(event)?.verdict === "refuse",
};
