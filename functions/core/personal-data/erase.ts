import type { AggregateRef } from "../../../schemas";
import { type ContentOverwriter, erasedContent } from "../agent/content";
import type { EventStore, StateReader, StoredState } from "../ports";
import type { PersonalState, RoleDescriptor } from "../role";
import { deterministicUlid } from "../sweeper";
import {
  type CustomerKeyStore,
  type DataSubject,
  type ErasureRecord,
  subjectKey,
} from "./customer-keys";

/**
 * Erasing a customer (seed 000 §4.3; `agentbus erase --customer`). Deleting the customer's data
 * key is the erasure: every personal field the event store holds sealed, and every message the
 * audit group keeps sealed, reads `[erased]` from then on (./vault.ts). Then the plain copies
 * derived from them are overwritten: the state each role keeps of the customer's conversations
 * and their turns (Role.personalState), each with one write conditional on the revision read, so a
 * consumer writing the same state at once fails its condition and decides again on the erased
 * state. What cannot be reached (the buses' archive, the queues) expires (./retention.ts).
 *
 * Erasing again changes nothing: the key is gone, and a state already erased is not written. A
 * second run does complete a first that stopped after the key: it overwrites what is left.
 */

export type ErasureOutcome = "erased" | "already_erased" | "unknown";

export interface ErasureReport {
  readonly outcome: ErasureOutcome;
  readonly subject: DataSubject;
  /** The erasure this run made, or the earlier one it found. */
  readonly erasure?: ErasureRecord;
  readonly conversations: number;
  /** State items and stored texts (agents' messages) overwritten by this run. */
  readonly overwritten: number;
}

/** Writes a state's data again if its revision is still the one read (false when it moved on). */
export interface StateRewriter {
  rewriteState(state: StoredState, data: unknown): Promise<boolean>;
}

export interface ErasurePorts {
  readonly keys: CustomerKeyStore;
  /** Reads a conversation's stream (its turns' task ids). */
  readonly store: Pick<EventStore, "readStream">;
  readonly states: StateReader & StateRewriter;
  /** The roles; those with `personalState` have their states overwritten. */
  readonly roles: readonly RoleDescriptor[];
  /** Where agents keep their runs' messages (Role.personalState `contentOf`). */
  readonly content?: ContentOverwriter;
  /** The aggregate type of a conversation's stream, whose events name its turns' tasks. */
  readonly conversationType: string;
}

const MAX_REWRITES = 5;
const BATCH = 100;

export async function eraseCustomer(
  ports: ErasurePorts,
  subject: DataSubject,
  erasure: ErasureRecord,
): Promise<ErasureReport> {
  const record = await ports.keys.customer(subject);
  const conversations = await ports.keys.conversationsOf(subject);
  if (!record && conversations.length === 0)
    return { outcome: "unknown", subject, conversations: 0, overwritten: 0 };
  let outcome: ErasureOutcome = "already_erased";
  if (record?.key && (await ports.keys.eraseKey(subject, record.key.keyId, erasure)))
    outcome = "erased";
  let overwritten = 0;
  for (const conversation of conversations) {
    // A claim that lost a race left its conversation listed under the loser too.
    const owner = await ports.keys.ownerOf(conversation);
    if (owner && subjectKey(owner) !== subjectKey(subject)) continue;
    overwritten += await eraseConversation(ports, conversation);
  }
  const kept = outcome === "erased" ? erasure : record?.erased;
  return {
    outcome,
    subject,
    ...(kept ? { erasure: kept } : {}),
    conversations: conversations.length,
    overwritten,
  };
}

/** Overwrites the personal texts of a conversation's states; answers how many were written. */
async function eraseConversation(ports: ErasurePorts, conversationId: string): Promise<number> {
  const stream = await ports.store.readStream(
    { type: ports.conversationType, id: conversationId },
    1,
    Number.MAX_SAFE_INTEGER,
  );
  const tasks = [...new Set(stream.map((e) => e.task_id))];
  const erasers = new Map<string, PersonalState<unknown>>();
  for (const role of ports.roles) {
    const personal = role.personalState;
    if (!personal) continue;
    for (const part of [
      { conversationId },
      ...tasks.map((taskId) => ({ conversationId, taskId })),
    ]) {
      const ref = personal.stateOf(part);
      if (ref) erasers.set(refKey(ref), personal);
    }
  }
  let written = 0;
  const refs = [...erasers.keys()].map(refOf);
  for (let at = 0; at < refs.length; at += BATCH)
    for (const state of await ports.states.loadStates(refs.slice(at, at + BATCH))) {
      const personal = erasers.get(refKey(state.aggregate));
      // An item holding only a group's gate records (a discarded start) refers to no texts.
      const gateOnly = state.data === undefined || state.data === null;
      const texts =
        gateOnly || !ports.content ? [] : await personal?.contentOf?.(state.data, ports.content);
      written += await eraseContent(ports.content, texts ?? []);
      written += await eraseState(ports.states, state, personal);
    }
  return written;
}

/** Overwrites the stored texts a state refers to; answers how many changed. */
async function eraseContent(
  content: ContentOverwriter | undefined,
  refs: readonly string[],
): Promise<number> {
  if (!content || refs.length === 0) return 0;
  const unique = [...new Set(refs)];
  const texts = await content.getMany(unique);
  let written = 0;
  for (const [i, ref] of unique.entries()) {
    const erased = erasedContent(texts[i] ?? "");
    if (erased === texts[i]) continue;
    await content.overwrite(ref, erased);
    written++;
  }
  return written;
}

async function eraseState(
  states: StateReader & StateRewriter,
  first: StoredState,
  personal: PersonalState<unknown> | undefined,
): Promise<number> {
  const erase = personal ? (data: unknown) => personal.erase(data) : undefined;
  let state: StoredState | undefined = first;
  for (let attempt = 0; erase && state && attempt < MAX_REWRITES; attempt++) {
    // An item holding only a group's gate records has no data to erase.
    if (state.data === undefined || state.data === null) return 0;
    const erased = erase(state.data);
    if (JSON.stringify(erased) === JSON.stringify(state.data)) return 0;
    if (await states.rewriteState(state, erased)) return 1;
    [state] = await states.loadStates([state.aggregate]);
  }
  if (!state || !erase) return 0;
  throw new Error(
    `${state.aggregate.type}/${state.aggregate.id} kept changing while it was erased; run the erasure again`,
  );
}

function refKey(ref: AggregateRef): string {
  return `${ref.type}#${ref.id}`;
}

function refOf(key: string): AggregateRef {
  const at = key.indexOf("#");
  return { type: key.slice(0, at), id: key.slice(at + 1) };
}

/**
 * The event id of an erasure's audit record (`operator.action.recorded`): a function of the
 * erasure, so that recording it again (a retry, a second erasure that found it done) is the same
 * message, which the audit group keeps once.
 */
export function erasureRecordId(subject: DataSubject, erasure: ErasureRecord): string {
  return deterministicUlid(
    `customer.erase#${subject.tenant}#${subject.customer}#${erasure.at}`,
    Date.parse(erasure.at),
  );
}
