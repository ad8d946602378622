import type { LocalScript, ModelRequest, RequestFacts } from "../../kit";
import type { ContentRole } from "./events";
import { CLAIM_HEADING, PREVIOUS_ROUND_HEADING } from "./headings";

/**
 * What the content agents answer with on the local model (a scripted stand-in, NOT a model: the
 * DeterministicLocalModel), each agent's module registering its own (`localScripts` of its model's
 * use, ./index.ts): seed 001 §6's topic selection, fact check, writing and review, derived from a
 * hash of the request, so the same request gets the same answer.
 *
 * Markers drive the paths a workflow can take: `[fail-fact-check]` anywhere in a fact-check request
 * gets verdict "fail" (the failure path); `[disputed-claims:N]` in a topic hint has topic selection
 * state N claims no source backs (a fact check of one fails); `[unusable-draft]` in a writing
 * request gets text that is not the JSON asked for (every time, so the agent run ends
 * NEEDS_HUMAN); `[needs-confirmation]` in a review request gets a request for an external
 * confirmation (the agent run goes BLOCKED until one is given); `[needs-revision]` has review
 * reject a first draft with notes, which the writer's next round answers and review then approves.
 */

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

/** Each content agent's script, by its role. */
export const CONTENT_AGENT_SCRIPTS: Readonly<Record<ContentRole, LocalScript>> = {
  "topic-selection": topicSelection,
  "fact-check": factCheck,
  writing,
  review,
};
