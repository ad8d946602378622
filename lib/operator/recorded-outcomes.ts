import { stateRefOf } from "../../functions/core/apply";
import { outcomeRecord } from "../../functions/core/commit";
import type {
  InboxRecord,
  OutcomeRecord,
  StateReader,
  StoredState,
  TraceReader,
} from "../../functions/core/ports";
import type { RoleDescriptor } from "../../functions/core/role";
import {
  AUDIT_GROUP,
  type AuditRecord,
  auditRecordRef,
  outcomeOfAuditRecord,
} from "../../functions/roles/audit/audit";
import type { AggregateRef, Envelope } from "../../schemas";

/**
 * The outcomes a group's writes record instead of inbox rows (functions/core/commit.ts
 * `recordsItself`): an applied stream event is recorded by the checkpoint of its stream, on the
 * state the role keeps for it (`stateOf`) or, for a shared stream, in the group's checkpoint row;
 * an unsequenced message by its id among the recent ones of that state, which the message's
 * payload names (the audit group keeps the message whole for this); the audit group's record is
 * its own. A trace reads them beside the inbox rows, which still record repairs, discards and
 * rejections.
 */

export type RecordedOutcomes = (
  eventIds: readonly string[],
  envelopes: readonly Envelope[],
) => Promise<OutcomeRecord[]>;

/** Where the records are read: the state items, and the groups' checkpoint rows. */
export interface RecordReads {
  readonly states: StateReader;
  readonly checkpoints: Pick<TraceReader, "groupCheckpoints" | "spilled">;
}

/** What these roles applied of the events, as their records say; undefined for no roles. */
export function recordedOutcomes(
  roles: readonly RoleDescriptor[],
  reads: RecordReads,
): RecordedOutcomes | undefined {
  const ordered = roles.filter((role) => !role.unordered);
  const audited = roles.some((role) => role.group === AUDIT_GROUP);
  if (!audited && ordered.length === 0) return undefined;
  return async (eventIds, envelopes) => {
    const asked = askedOf(ordered, envelopes);
    const [audit, onStates, inRows] = await Promise.all([
      audited ? auditOutcomes(reads.states, eventIds) : [],
      stateCheckpointOutcomes(reads, asked.onState),
      rowCheckpointOutcomes(reads.checkpoints, asked.inRow),
    ]);
    return [...audit, ...[...onStates, ...inRows].map((a) => appliedRecord(a, envelopes))];
  };
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

/** One stream event a role subscribes to, and where its checkpoint is kept. */
interface Asked {
  readonly role: RoleDescriptor;
  readonly event: Envelope;
  /** The state whose gate records hold the stream's checkpoint (not for a shared stream). */
  readonly ref?: AggregateRef;
}

function askedOf(
  roles: readonly RoleDescriptor[],
  envelopes: readonly Envelope[],
): { onState: Asked[]; inRow: Asked[] } {
  const onState: Asked[] = [];
  const inRow: Asked[] = [];
  for (const role of roles)
    for (const event of envelopes) {
      if (!role.subscriptions.includes(event.event_type)) continue;
      const sequenced = event.aggregate.version > 0;
      if (sequenced && role.sharedStreams?.includes(event.aggregate.type))
        inRow.push({ role, event });
      else {
        const ref = stateOf(role, event);
        if (ref) onState.push({ role, event, ref });
      }
    }
  return { onState, inRow };
}

/** The role's state of a stored event; undefined when the event cannot name one. */
function stateOf(role: RoleDescriptor, event: Envelope): AggregateRef | undefined {
  try {
    return stateRefOf(role, event);
  } catch {
    return undefined;
  }
}

/**
 * The events their state records: stream events its checkpoint of their stream has passed,
 * unsequenced messages among its recent ids, or spilled from them into a row of the group.
 */
async function stateCheckpointOutcomes(
  reads: RecordReads,
  asked: readonly Asked[],
): Promise<Asked[]> {
  if (asked.length === 0) return [];
  const loaded = await reads.states.loadStates(uniqueRefs(asked.flatMap((a) => a.ref ?? [])));
  const byKey = new Map(loaded.map((s) => [keyOf(s.aggregate), s]));
  const stateOfAsked = (a: Asked) => (a.ref ? byKey.get(keyOf(a.ref)) : undefined);
  const recorded = asked.filter((a) => passed(stateOfAsked(a), a.event));
  const spillable = asked.filter(
    (a) =>
      a.event.aggregate.version === 0 &&
      !recorded.includes(a) &&
      stateOfAsked(a)?.gate?.spilledUntil !== undefined,
  );
  if (spillable.length === 0) return recorded;
  const spilled = await reads.checkpoints.spilled(
    spillable.map((a) => ({ group: a.role.group, eventId: a.event.event_id })),
  );
  return [...recorded, ...spillable.filter((_, i) => spilled[i])];
}

/** The events of shared streams the group's checkpoint row has passed. */
async function rowCheckpointOutcomes(
  reader: RecordReads["checkpoints"],
  asked: readonly Asked[],
): Promise<Asked[]> {
  if (asked.length === 0) return [];
  const versions = await reader.groupCheckpoints(
    asked.map((a) => ({ group: a.role.group, stream: a.event.aggregate })),
  );
  return asked.filter((a, i) => (versions[i] ?? 0) >= a.event.aggregate.version);
}

/**
 * True when the state records the event: a stream event by its stream's checkpoint, an
 * unsequenced message by its id among the recent ones (while they keep it).
 */
function passed(state: StoredState | undefined, event: Envelope): boolean {
  if (event.aggregate.version === 0) return state?.gate?.recent[event.event_id] !== undefined;
  const checkpoint = state?.gate?.checkpoints[keyOf(event.aggregate)] ?? 0;
  return checkpoint >= event.aggregate.version;
}

/**
 * Applied, as far as the checkpoint says. When: the time of the first event the group emitted
 * for it (committed in the same write), or not known ("") when it emitted none.
 */
function appliedRecord({ role, event }: Asked, envelopes: readonly Envelope[]): InboxRecord {
  const emitted = envelopes.find(
    (e) => e.causation_id === event.event_id && e.producer === role.group,
  );
  return outcomeRecord(role.group, event, "applied", {
    recordedAt: emitted?.occurred_at ?? "",
    expiresAt: Number.MAX_SAFE_INTEGER,
  });
}

function uniqueRefs(refs: readonly AggregateRef[]): AggregateRef[] {
  return [...new Map(refs.map((r) => [keyOf(r), r])).values()];
}

function keyOf(ref: AggregateRef): string {
  return `${ref.type}#${ref.id}`;
}
