import type { ContentRole, NodeRequested } from "../../kit";
import { canonicalJson } from "../../kit";

/** What the content agents tell their model: the system instructions per role, and the request. */
export const INSTRUCTIONS: Readonly<Record<ContentRole, string>> = {
  "topic-selection":
    "You are the topic selection agent of a newsroom. From the request, choose a timely topic " +
    "and an angle, and list the sources to work from. Answer with one JSON object with the " +
    "fields topic (string), angle (string) and sources (array of strings).",
  "fact-check":
    "You are the fact checking agent of a newsroom. Check the claims behind the selected topic " +
    "against its sources. Answer with one JSON object with the fields verdict (pass or fail), " +
    "checked_claims (integer) and notes (string).",
  writing:
    "You are the writing agent of a newsroom. Write a draft article on the selected topic and " +
    "angle. Answer with one JSON object with the fields title (string) and body (string).",
  review:
    "You are the review agent of a newsroom. Check grammar and style of the draft and settle " +
    "the final title. Answer with one JSON object with the fields approved (boolean), edits " +
    "(integer) and final_title (string).",
};

/** What every content role may answer instead of its output (./confirm). */
export const CONFIRMATION_INSTRUCTION =
  "If the work cannot be finished without a confirmation from outside the newsroom (a source, " +
  'an editor), answer instead with one JSON object {"needs_confirmation": {"question": string}}; ' +
  "once a confirmation is given below the request, finish the work.";

/** The user message: the run's request and the upstream results, as canonical JSON. */
export function promptOf(request: NodeRequested): string {
  const upstream = Object.keys(request.input).length
    ? `Results of the previous steps, by step:\n${canonicalJson(request.input)}`
    : "There are no previous steps.";
  return `The request:\n${canonicalJson(request.run_input)}\n\n${upstream}`;
}
