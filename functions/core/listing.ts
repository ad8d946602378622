import { isoTime } from "./iso-time";
import type { StateListing, StateSummary } from "./ports";

/**
 * Where a summarized state sits in the operator's lists (StateListing): when it was first
 * summarized, and since when it waits for what it waits for. The lists are keyed by these times,
 * not by the time of the last change, so a commit that keeps the state's kind and what it waits
 * for keeps its list entries where they are, and the indexes write nothing for it.
 *
 * A state stays listed from when it first is: a commit whose role stops summarizing it, or that
 * ends the state, drops the listing, and a later summary lists it anew.
 */
export function listingAfter(
  previous: StateListing | undefined,
  summary: StateSummary,
  now: Date,
): StateListing;
export function listingAfter(
  previous: StateListing | undefined,
  summary: StateSummary | undefined,
  now: Date,
): StateListing | undefined;
export function listingAfter(
  previous: StateListing | undefined,
  summary: StateSummary | undefined,
  now: Date,
): StateListing | undefined {
  if (summary === undefined) return undefined;
  const { waiting } = summary;
  // Nearly every commit keeps both keys: the previous listing is the answer, and no time is read.
  if (previous !== undefined && previous.waiting === waiting) return previous;
  const at = isoTime(now);
  const listedAt = previous?.listedAt ?? at;
  return waiting === undefined ? { listedAt } : { listedAt, waiting, waitingSince: at };
}
