import type { NodeRequested } from "../../kit";
import { canonicalJson } from "../../kit";
import type { ContentRole } from "./events";
import { CLAIM_HEADING, PREVIOUS_ROUND_HEADING } from "./headings";

/** What the content agents tell their model: the system instructions per role, and the request. */
export const INSTRUCTIONS: Readonly<Record<ContentRole, string>> = {
  "topic-selection":
    "You are the topic selection agent of a newsroom. From the request, choose a timely topic " +
    "and an angle, list the sources to work from, and state the claims the article will rest " +
    "on, each one short sentence that can be checked on its own (at most 12). Answer with one " +
    "JSON object with the fields topic (string), angle (string), sources (array of strings) and " +
    "claims (array of strings).",
  "fact-check":
    "You are the fact checking agent of a newsroom. When the request gives one claim to check, " +
    "check that claim against the sources; otherwise check the claims behind the selected topic. " +
    "Answer with one JSON object with the fields verdict (pass or fail), checked_claims " +
    "(integer) and notes (string).",
  writing:
    "You are the writing agent of a newsroom. Write a draft article on the selected topic and " +
    "angle. When the request gives the review of your previous draft, revise that draft so that " +
    "it answers the review's notes. Answer with one JSON object with the fields title (string) " +
    "and body (string).",
  review:
    "You are the review agent of a newsroom. Check the draft's facts against the fact check, " +
    "its grammar and style, and settle the article as it would be published. Approve it, or " +
    "do not and say in notes what the writer must change. Answer with one JSON object with the " +
    "fields approved (boolean), edits (integer), final_title (string), final_body (string) and, " +
    "when not approved, notes (string).",
};

/** What every content role may answer instead of its output (./confirm). */
export const CONFIRMATION_INSTRUCTION =
  "If the work cannot be finished without a confirmation from outside the newsroom (a source, " +
  'an editor), answer instead with one JSON object {"needs_confirmation": {"question": string}}; ' +
  "once a confirmation is given below the request, finish the work.";

const ITEM_HEADING = "The item of the list to work on";

/**
 * The user message: the run's request and the upstream results, as canonical JSON; for an item
 * of a map node, the item (its value: a claim, for the fact check); inside a loop from round 2
 * on, the round and the body's results of the round before (the review's notes, for the writer).
 */
export function promptOf(role: ContentRole, request: NodeRequested): string {
  const upstream = Object.keys(request.input).length
    ? `Results of the previous steps, by step:\n${canonicalJson(request.input)}`
    : "There are no previous steps.";
  const parts = [`The request:\n${canonicalJson(request.run_input)}`, upstream];
  const { item, loop } = request;
  if (item)
    parts.push(
      `${role === "fact-check" ? CLAIM_HEADING : ITEM_HEADING} (${item.index + 1} of ${item.count}):\n${canonicalJson(item.value)}`,
    );
  if (loop)
    parts.push(
      `This is round ${loop.round}. ${PREVIOUS_ROUND_HEADING}, by step:\n${canonicalJson(loop.previous)}`,
    );
  return parts.join("\n\n");
}
