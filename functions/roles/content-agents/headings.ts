/**
 * The headings of the content agents' prompts that their local scripts read back
 * (./local-scripts.ts).
 */

/** The heading of a map item's value: the fact check's is one claim of the topic's list. */
export const CLAIM_HEADING = "The claim to check";
/** The heading of the previous round's results, in a request inside a loop from round 2 on. */
export const PREVIOUS_ROUND_HEADING = "Results of the previous round";
