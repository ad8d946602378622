import { createHash } from "node:crypto";
import { PermanentError } from "../core/errors";
import type { ModelPort, ModelRequest, ModelResponse, ModelToolCall } from "../core/model";
import { CLAIM_HEADING, PREVIOUS_ROUND_HEADING } from "../roles/content-agents/headings";
import { refundReview } from "./local-model-refund";
import {
  HUMAN_REVIEW_MARKER,
  MODEL_ACCESS_DENIED_MARKER,
  replyGeneration,
} from "./local-model-reply";
import { LOCAL_MODEL_NAME, type RequestFacts, type Script, ToolUse } from "./local-model-script";

export {
  HUMAN_REVIEW_MARKER,
  LOCAL_MODEL_NAME,
  MODEL_ACCESS_DENIED_MARKER,
  type RequestFacts,
  type Script,
  ToolUse,
};

/**
 * NOT a model. A deterministic stand-in for the ModelPort, for the local runtime and for tests:
 * it answers from scripts registered per agent role (`request.metadata.role`), so a workflow runs
 * end to end without Bedrock, AWS credentials or network, and every run gives the same outputs.
 *
 * - A script returns a string (sent as is), an object (sent as its JSON text) or a ToolUse (the
 *   tool calls it asks for, stop reason `tool_use`).
 * - Same request, same answer: scripts derive everything from the request text through a hash
 *   (`RequestFacts`); nothing reads the clock or a random source. `latencyMs` is the reported
 *   latency, not a wait.
 * - Fault injection (the only state): `failNext(role, error)` makes the next call for the role
 *   throw `error`; `invalidNext(role, count)` makes the next `count` calls answer non-JSON text.
 * - A role without a script -> PermanentError `model.no_script`.
 *
 * The default scripts (`DEFAULT_SCRIPTS`) cover the content-production workflow of seed 001 §6
 * (`topic-selection`, `fact-check`, `writing`, `review`), the support workflow's
 * `reply-generation` (./local-model-reply.ts) and the refund agent's `refund-review`, which calls
 * tools (./local-model-refund.ts). Put `[fail-fact-check]` anywhere in a fact-check request to get verdict
 * "fail" and drive the failure path, `[disputed-claims:N]` in a topic hint to have topic
 * selection state N claims no source backs (a fact check of one fails), and `[unusable-draft]` in
 * a writing request to get text that is not the JSON asked for (every time, so the agent run ends
 * NEEDS_HUMAN), `[needs-confirmation]` in a review request to get a request for an external
 * confirmation (the agent run goes BLOCKED until one is given), and `[needs-revision]` to have
 * review reject a first draft with notes, which the writer's next round answers and review then
 * approves; the reply and refund scripts say what drives them.
 */
export class DeterministicLocalModel implements ModelPort {
  readonly name = LOCAL_MODEL_NAME;
  private readonly scripts: ReadonlyMap<string, Script>;
  private readonly latencyMs: number;
  private readonly failures = new Map<string, unknown[]>();
  private readonly invalid = new Map<string, number>();
  private readonly calls = new Map<string, number>();

  constructor(props: DeterministicLocalModelProps = {}) {
    const latencyMs = props.latencyMs ?? 0;
    if (!Number.isFinite(latencyMs) || latencyMs < 0)
      throw new PermanentError("model.invalid_config", `latencyMs must be >= 0, got ${latencyMs}`);
    this.latencyMs = latencyMs;
    this.scripts = new Map(
      Object.entries({
        ...(props.withDefaults === false ? {} : DEFAULT_SCRIPTS),
        ...props.scripts,
      }),
    );
  }

  /** The next call for `role` throws `error` (queued: call it twice to fail twice). */
  failNext(role: string, error: unknown): this {
    const queue = this.failures.get(role) ?? [];
    queue.push(error);
    this.failures.set(role, queue);
    return this;
  }

  /** The next `count` calls for `role` answer text that is not JSON. */
  invalidNext(role: string, count = 1): this {
    if (!Number.isInteger(count) || count < 0)
      throw new RangeError(`count must be a non-negative integer, got ${count}`);
    this.invalid.set(role, (this.invalid.get(role) ?? 0) + count);
    return this;
  }

  /** How many calls `role` has received (failed and invalid ones included). */
  callCount(role: string): number {
    return this.calls.get(role) ?? 0;
  }

  async converse(request: ModelRequest): Promise<ModelResponse> {
    const role = request.metadata?.role;
    if (role !== undefined) this.calls.set(role, this.callCount(role) + 1);

    const failure = role === undefined ? undefined : this.failures.get(role);
    if (failure !== undefined && failure.length > 0) throw failure.shift();

    const script = role === undefined ? undefined : this.scripts.get(role);
    if (role === undefined || script === undefined)
      throw new PermanentError(
        "model.no_script",
        `${LOCAL_MODEL_NAME} has no script for role ${role === undefined ? "(none: metadata.role is missing)" : `"${role}"`}`,
        { details: { role: role ?? null, known_roles: [...this.scripts.keys()] } },
      );

    const invalidLeft = this.invalid.get(role) ?? 0;
    let text: string;
    let toolCalls: readonly ModelToolCall[] = [];
    if (invalidLeft > 0) {
      this.invalid.set(role, invalidLeft - 1);
      text = `I would rather describe the answer in prose than as JSON (scripted invalid output for ${role}).`;
    } else {
      const answer = script(request, factsOf(request));
      if (answer instanceof ToolUse) toolCalls = answer.calls;
      text =
        answer instanceof ToolUse
          ? ""
          : typeof answer === "string"
            ? answer
            : JSON.stringify(answer);
    }
    return {
      text,
      ...(toolCalls.length > 0 ? { toolCalls } : {}),
      stopReason: toolCalls.length > 0 ? "tool_use" : "end_turn",
      usage: { inputTokens: tokens(requestText(request)), outputTokens: tokens(text) },
      modelId: LOCAL_MODEL_NAME,
      latencyMs: this.latencyMs,
    };
  }
}

export interface DeterministicLocalModelProps {
  /** Scripts by role; they override the default scripts of the same role. */
  readonly scripts?: Readonly<Record<string, Script>>;
  /** Include DEFAULT_SCRIPTS. @default true */
  readonly withDefaults?: boolean;
  /** Latency reported in every response (no actual wait). @default 0 */
  readonly latencyMs?: number;
}

export const FAIL_FACT_CHECK_MARKER = "[fail-fact-check]";

const ADJECTIVES = [
  "quiet",
  "overlooked",
  "fast-growing",
  "contested",
  "practical",
  "local",
  "emerging",
  "costly",
] as const;
const SUBJECTS = [
  "battery recycling",
  "urban heat islands",
  "open-source maintainers",
  "rural broadband",
  "water reuse",
  "small-farm robotics",
  "grid storage",
  "public transit data",
] as const;
const ANGLES = [
  "who pays and who benefits",
  "what changed in the last year",
  "the numbers behind the headlines",
  "lessons from early adopters",
  "the risks nobody prices in",
  "a practical guide for newcomers",
] as const;
const SOURCE_KINDS = ["report", "dataset", "interview", "filing", "study", "press-release"];
const VERBS = ["reshapes", "tests", "rewards", "strains", "redefines", "quietly funds"] as const;
/** In a topic hint: topic selection states N claims (the first N after the lead) no source backs. */
const DISPUTED_CLAIMS = /\[disputed-claims:(\d+)\]/;
/** The words of a claim no source backs: a fact check of it fails. */
export const UNSOURCED_CLAIM = "a figure no source backs";

/** The claims behind a topic: three or four, the lead first; `disputed` of them unsourced. */
function claimsOf(subject: string, facts: RequestFacts): string[] {
  const count = facts.int(3, 4, "claims");
  const disputed = Number(DISPUTED_CLAIMS.exec(facts.text)?.[1] ?? 0);
  return Array.from({ length: count }, (_, i) =>
    i > 0 && i <= disputed
      ? `Claim ${i + 1}: ${subject} doubled last year, ${UNSOURCED_CLAIM}.`
      : `Claim ${i + 1}: ${subject} ${facts.pick(VERBS, `claim-${i}`)} ${facts.pick(ADJECTIVES, `claim-adjective-${i}`)} markets.`,
  );
}

function topicSelection(_request: ModelRequest, facts: RequestFacts) {
  const subject = facts.pick(SUBJECTS, "subject");
  const count = facts.int(2, 3, "sources");
  return {
    claims: claimsOf(subject, facts),
    topic: `The ${facts.pick(ADJECTIVES, "adjective")} economics of ${subject}`,
    angle: facts.pick(ANGLES, "angle"),
    sources: Array.from(
      { length: count },
      (_, i) =>
        `kb://${facts.pick(SOURCE_KINDS, `source-kind-${i}`)}/${facts.digest.slice(i * 8, i * 8 + 8)}`,
    ),
  };
}

/**
 * A fact check: of one claim when the request gives one (a map item), else of the claims behind
 * the topic. It fails on `[fail-fact-check]`, or on a claim no source backs.
 */
function factCheck(_request: ModelRequest, facts: RequestFacts) {
  const failed =
    facts.text.includes(FAIL_FACT_CHECK_MARKER) || facts.text.includes(UNSOURCED_CLAIM);
  const checked = facts.text.includes(CLAIM_HEADING) ? 1 : facts.int(2, 7, "claims");
  return {
    verdict: failed ? ("fail" as const) : ("pass" as const),
    checked_claims: checked,
    notes: failed
      ? `${checked} claims checked; ${facts.int(1, checked, "disputed")} could not be verified (ref ${facts.digest.slice(0, 8)}).`
      : `${checked} claims checked against the sources; all consistent (ref ${facts.digest.slice(0, 8)}).`,
  };
}

/** In a writing request: the writer never answers in shape (the agent run ends NEEDS_HUMAN). */
export const UNUSABLE_DRAFT_MARKER = "[unusable-draft]";

/** The line a revised draft ends with: the writer answered the review's notes. */
export const REVISED_DRAFT = "Revised after review:";
/** In a topic hint: review rejects a draft that was not revised, with notes. */
export const NEEDS_REVISION_MARKER = "[needs-revision]";
const NOTES_IN_TEXT = /"notes"\s*:\s*"((?:[^"\\]|\\.){1,400})"/;

/** A JSON string's text as it appears inside a JSON document, decoded; undefined if it is not. */
function jsonString(quoted: string | undefined): string | undefined {
  if (quoted === undefined) return undefined;
  try {
    return JSON.parse(`"${quoted}"`) as string;
  } catch {
    return undefined;
  }
}

function writing(_request: ModelRequest, facts: RequestFacts) {
  if (facts.text.includes(UNUSABLE_DRAFT_MARKER))
    return `I could not write this one (ref ${facts.digest.slice(0, 8)}).`;
  const draft = firstDraft(facts);
  // A round after the first: the review's notes of the round before are in the request.
  const previous = facts.text.split(PREVIOUS_ROUND_HEADING)[1];
  const notes = previous === undefined ? undefined : jsonString(NOTES_IN_TEXT.exec(previous)?.[1]);
  if (notes === undefined) return draft;
  return { title: draft.title, body: `${draft.body}\n\n${REVISED_DRAFT} ${notes}` };
}

function firstDraft(facts: RequestFacts) {
  const subject = facts.pick(SUBJECTS, "subject");
  const title = `How ${subject} ${facts.pick(VERBS, "verb")} ${facts.pick(ADJECTIVES, "adjective")} markets`;
  const paragraphs = facts.int(2, 4, "paragraphs");
  const body = Array.from(
    { length: paragraphs },
    (_, i) => `Paragraph ${i + 1} looks at ${facts.pick(ANGLES, `angle-${i}`)} in ${subject}.`,
  ).join("\n\n");
  return { title, body: `${body}\n\n(draft ${facts.digest.slice(0, 8)})` };
}

const TITLE_IN_TEXT = /"title"\s*:\s*"((?:[^"\\]|\\.){1,200})"/;
const BODY_IN_TEXT = /"body"\s*:\s*"((?:[^"\\]|\\.){1,20000})"/;

/**
 * In a review request: the reviewer asks for an external confirmation
 * (`{"needs_confirmation": ...}`, the agent run goes BLOCKED) until the request carries one.
 */
export const NEEDS_CONFIRMATION_MARKER = "[needs-confirmation]";
const CONFIRMATION_GIVEN = "Confirmation received";

/**
 * A review: asks for a confirmation on `[needs-confirmation]` (until given); on
 * `[needs-revision]` rejects a draft that was not revised, with notes; else approves the draft
 * (the first title and body in the request: the writer's) as the final text.
 */
function review(_request: ModelRequest, facts: RequestFacts) {
  if (facts.text.includes(NEEDS_CONFIRMATION_MARKER) && !facts.text.includes(CONFIRMATION_GIVEN))
    return {
      needs_confirmation: {
        question: `Does the source behind the lead quote stand by it (ref ${facts.digest.slice(0, 8)})?`,
      },
    };
  const final_title =
    jsonString(TITLE_IN_TEXT.exec(facts.text)?.[1]) ??
    `The ${facts.pick(ADJECTIVES, "adjective")} case for ${facts.pick(SUBJECTS, "subject")}`;
  const draft = jsonString(BODY_IN_TEXT.exec(facts.text)?.[1]);
  const final_body = draft ?? `An article on ${final_title.toLowerCase()}.`;
  const edits = facts.int(0, 9, "edits");
  if (facts.text.includes(NEEDS_REVISION_MARKER) && !final_body.includes(REVISED_DRAFT))
    return {
      approved: false as const,
      edits,
      final_title,
      final_body,
      notes: `The lead claims more than the fact check supports; name the source of each figure (ref ${facts.digest.slice(0, 8)}).`,
    };
  return { approved: true as const, edits, final_title, final_body };
}

/** Scripts for the content-production workflow (seed 001 §6) and the support workflow. */
export const DEFAULT_SCRIPTS: Readonly<Record<string, Script>> = {
  "topic-selection": topicSelection,
  "fact-check": factCheck,
  writing,
  review,
  "reply-generation": replyGeneration,
  "refund-review": refundReview,
};

function requestText(request: ModelRequest): string {
  const line = (m: ModelRequest["messages"][number]) =>
    [
      `${m.role}: ${m.text}`,
      ...(m.toolCalls ?? []).map((c) => `tool call ${c.id} ${c.name} ${JSON.stringify(c.input)}`),
      ...(m.toolResults ?? []).map(
        (r) =>
          `tool result ${r.toolCallId}${r.isError ? " (error)" : ""} ${JSON.stringify(r.content)}`,
      ),
    ].join("\n");
  return [request.system ?? "", ...request.messages.map(line)].join("\n");
}

function factsOf(request: ModelRequest): RequestFacts {
  const text = requestText(request);
  const digest = sha256(`${request.metadata?.role ?? ""}\n${text}`);
  const unit = (salt: string) => Number.parseInt(sha256(`${digest}:${salt}`).slice(0, 12), 16);
  return {
    text,
    digest,
    pick: (options, salt) => {
      const value = options[unit(salt) % options.length];
      if (value === undefined) throw new RangeError("pick needs at least one option");
      return value;
    },
    int: (min, max, salt) => min + (unit(salt) % (max - min + 1)),
  };
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A rough token count (about four characters a token), stable for a given text. */
function tokens(text: string): number {
  return Math.ceil(text.length / 4);
}
