import type { EventPayloads, EventType } from "../../../schemas";
import {
  type AttentionRule,
  type AttentionSignal,
  AWAITING_APPROVAL,
  NEEDS_HUMAN,
  raiseOn,
  UNKNOWN_SIDE_EFFECTS,
} from "../attention";
import type { Waiting } from "./agent";

/** The event types whose payload says what an agent run waits for (`waiting`). */
export type WaitingEventType = {
  [K in EventType]: EventPayloads[K] extends { readonly waiting: Waiting["kind"] } ? K : never;
}[EventType];

/** What a run waits a person for (a run waiting for outside work, `task`, waits for nobody). */
type PersonWait = Exclude<Waiting["kind"], "task">;

/** The signal a run waiting for a person raises, by what it waits for. */
const PERSON_WAITS: Readonly<Record<PersonWait, AttentionSignal>> = {
  approval: AWAITING_APPROVAL,
  outcome: UNKNOWN_SIDE_EFFECTS,
  answer: NEEDS_HUMAN,
};

/**
 * The rules of an agent loop's "waits for a person" fact (`type`, whose payload carries the
 * waiting kind): a call waiting for `approval` raises `awaiting-approval`, a write whose
 * `outcome` could not be learnt `unknown-side-effects`, a run handed over for an `answer`
 * `needs-human`.
 */
export function personWaitRules(type: WaitingEventType): AttentionRule[] {
  return (Object.keys(PERSON_WAITS) as PersonWait[]).map((kind) =>
    raiseOn(type, PERSON_WAITS[kind], (payload) => payload.waiting === kind),
  );
}
