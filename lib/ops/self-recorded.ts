import { stateRefOf } from "../../functions/core/apply";
import { outcomeRecord } from "../../functions/core/commit";
import type { Role } from "../../functions/core/pipeline";
import type {
  InboxRecord,
  OutcomeRecord,
  StateReader,
  StoredState,
} from "../../functions/core/ports";
import {
  AUDIT_GROUP,
  type AuditRecord,
  auditRecordRef,
  outcomeOfAuditRecord,
} from "../../functions/roles/audit";
import { conversationProjection } from "../../functions/roles/conversation-projection";
import { taskProjection } from "../../functions/roles/task-projection";
import type { AggregateRef, Envelope } from "../../schemas";

/**
 * The outcomes of the groups whose states record what they applied instead of inbox rows
 * (Role.selfRecorded): the audit records, and the projections' stream checkpoints. A trace reads
 * them beside the inbox rows.
 */

/** The ordered roles whose states record what they applied (their checkpoints). */
const ORDERED: readonly Role<unknown>[] = [
  taskProjection as Role<unknown>,
  conversationProjection as Role<unknown>,
];

export type SelfRecorded = (
  eventIds: readonly string[],
  envelopes: readonly Envelope[],
) => Promise<OutcomeRecord[]>;

/** What the stack's self-recorded groups applied of these events; undefined when it has none. */
export function selfRecordedOutcomes(
  groups: readonly string[],
  states: StateReader,
): SelfRecorded | undefined {
  const ordered = ORDERED.filter((role) => groups.includes(role.group));
  const audited = groups.includes(AUDIT_GROUP);
  if (!audited && ordered.length === 0) return undefined;
  return async (eventIds, envelopes) => [
    ...(audited ? await auditOutcomes(states, eventIds) : []),
    ...(await checkpointOutcomes(states, ordered, envelopes)),
  ];
}

/** The audit records of these ids: each stands in for the group's inbox row. */
async function auditOutcomes(
  states: StateReader,
  eventIds: readonly string[],
): Promise<OutcomeRecord[]> {
  const found = await states.loadStates(eventIds.map(auditRecordRef));
  return found.flatMap((state) => {
    const record = state.data as AuditRecord | undefined;
    return record?.event_id ? [outcomeOfAuditRecord(record)] : [];
  });
}

/**
 * Each stream event an ordered self-recorded role subscribes to, applied as far as the
 * checkpoint its state keeps of the event's stream says. When it was applied is not kept.
 */
async function checkpointOutcomes(
  states: StateReader,
  roles: readonly Role<unknown>[],
  envelopes: readonly Envelope[],
): Promise<OutcomeRecord[]> {
  const asked = roles.flatMap((role) =>
    envelopes
      .filter(
        (e) =>
          e.aggregate.version > 0 &&
          role.subscriptions.includes(e.event_type) &&
          !role.sharedStreams?.includes(e.aggregate.type),
      )
      .map((event) => ({ role, event, ref: stateRefOf(role, event) })),
  );
  if (asked.length === 0) return [];
  const loaded = await states.loadStates(asked.map((a) => a.ref));
  const byKey = new Map(loaded.map((s) => [keyOf(s.aggregate), s]));
  return asked.flatMap(({ role, event, ref }) => {
    const state = byKey.get(keyOf(ref));
    return appliedTo(state, event) ? [appliedRecord(role.group, event)] : [];
  });
}

function appliedTo(state: StoredState | undefined, event: Envelope): boolean {
  const checkpoint = state?.gate?.checkpoints[keyOf(event.aggregate)] ?? 0;
  return checkpoint >= event.aggregate.version;
}

/** Applied, as far as the state says: when it was is not kept. */
function appliedRecord(group: string, event: Envelope): InboxRecord {
  return outcomeRecord(group, event, "applied", {
    recordedAt: "",
    expiresAt: Number.MAX_SAFE_INTEGER,
  });
}

function keyOf(ref: AggregateRef): string {
  return `${ref.type}#${ref.id}`;
}
