/**
 * Each conversation's client sequences at the front door: the place of each posted message in
 * its conversation (`client_seq` of `conversation.message.received`), which the conversation
 * applies messages in (functions/roles/customer-support/conversation/client-order.ts).
 *
 * A message that names its `client_seq` keeps it; one that does not gets the next after the
 * highest recorded, in the order the door takes them (one conditional write per message
 * serializes them). The door keeps the highest sequence and the last RECENT_SEQUENCES claims,
 * each with a hash of its message and the event id it was put on the bus under:
 * - a sequence claimed before by the same message is a repeat: its event is put on the bus
 *   again under the same id (consumers take it as a duplicate), and the answer is the same;
 * - claimed before by another message: refused (409 `client_seq_taken`);
 * - more than CLIENT_SEQ_AHEAD above the highest: refused (409 `client_seq_ahead`);
 * - older than the claims kept (at or below the highest minus RECENT_SEQUENCES, and not kept):
 *   refused (409 `client_seq_stale`), as the door cannot tell a repeat from another message.
 * A sequence below the highest that was never claimed (the client sent 3 before 2) is taken.
 */

import { fail } from "./http";

/** How far above the highest claimed sequence a message may name its own. */
export const CLIENT_SEQ_AHEAD = 100;
/** How many claims a conversation's record keeps (to tell a repeat from another message). */
export const RECENT_SEQUENCES = 16;

/** A message's claim: its sequence (undefined: the next one), its hash, its new event id. */
export interface SequenceClaim {
  readonly seq?: number;
  readonly messageSha: string;
  readonly eventId: string;
}

export type SequenceOutcome =
  /** Claimed now (`new`) or before by the same message (`repeat`), under `eventId`. */
  | { readonly kind: "new" | "repeat"; readonly seq: number; readonly eventId: string }
  | { readonly kind: "taken" | "ahead" | "stale"; readonly seq: number; readonly highest: number };

/** What the door keeps of a conversation: the highest sequence and the recent claims. */
export interface SequenceRecord {
  readonly highest: number;
  /** `<seq>:<message hash>:<event id>`, oldest first. */
  readonly recent: readonly string[];
  /** Bumped by each write, which is conditional on it. */
  readonly revision: number;
}

export interface ClientSequences {
  /** Claim a sequence of `conversation` (its tenant's key) for a message. */
  claim(conversation: string, claim: SequenceClaim): Promise<SequenceOutcome>;
}

/**
 * Claim a sequence of `conversation` for a message: its event id and sequence (a repeat's first
 * event id), or the door's refusal (409 `client_seq_taken`, `_ahead`, `_stale`) naming why.
 */
export async function claimOrRefuse(
  sequences: ClientSequences,
  conversation: string,
  claim: SequenceClaim,
): Promise<{ readonly eventId: string; readonly seq: number }> {
  const outcome = await sequences.claim(conversation, claim);
  if ("eventId" in outcome) return { eventId: outcome.eventId, seq: outcome.seq };
  const at = `client_seq ${outcome.seq}`;
  const { highest } = outcome;
  const why = {
    taken: `${at} was sent before with another message`,
    ahead: `${at} is more than ${CLIENT_SEQ_AHEAD} above the conversation's highest (${highest})`,
    stale: `${at} is older than the last ${RECENT_SEQUENCES} the front door keeps (highest ${highest}): it cannot tell a repeat from another message`,
  }[outcome.kind];
  fail(`client_seq_${outcome.kind}`, why, {
    errors: [{ path: "(body).client_seq", message: why }],
  });
}

/** The outcome of `claim` on `record`, and the record to write when it changes. */
export function claimOn(
  record: SequenceRecord | undefined,
  claim: SequenceClaim,
): { readonly outcome: SequenceOutcome; readonly next?: SequenceRecord } {
  const highest = record?.highest ?? 0;
  const recent = record?.recent ?? [];
  const seq = claim.seq ?? highest + 1;
  const kept = recent.map(parseClaim).find((c) => c.seq === seq);
  if (kept)
    return kept.messageSha === claim.messageSha
      ? { outcome: { kind: "repeat", seq, eventId: kept.eventId } }
      : { outcome: { kind: "taken", seq, highest } };
  if (seq > highest + CLIENT_SEQ_AHEAD) return { outcome: { kind: "ahead", seq, highest } };
  if (seq <= highest - RECENT_SEQUENCES) return { outcome: { kind: "stale", seq, highest } };
  const entry = `${seq}:${claim.messageSha}:${claim.eventId}`;
  return {
    outcome: { kind: "new", seq, eventId: claim.eventId },
    next: {
      highest: Math.max(highest, seq),
      recent: [...recent, entry].slice(-RECENT_SEQUENCES),
      revision: (record?.revision ?? 0) + 1,
    },
  };
}

function parseClaim(entry: string): { seq: number; messageSha: string; eventId: string } {
  const [seq, messageSha, eventId] = entry.split(":");
  return { seq: Number(seq), messageSha: messageSha ?? "", eventId: eventId ?? "" };
}

/** In memory, for tests and the simulation. */
export class InMemoryClientSequences implements ClientSequences {
  readonly records = new Map<string, SequenceRecord>();

  async claim(conversation: string, claim: SequenceClaim): Promise<SequenceOutcome> {
    const { outcome, next } = claimOn(this.records.get(conversation), claim);
    if (next) this.records.set(conversation, next);
    return outcome;
  }
}
