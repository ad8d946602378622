import type { EventStore, InboxRecord, TraceReader } from "../../functions/core/ports";
import {
  AUDIT_GROUP,
  type AuditRecord,
  auditRecordOfRow,
  auditRecordRef,
  outcomeOfAuditRecord,
} from "../../functions/roles/audit/audit";

type AuditStore = Pick<EventStore, "load"> & Pick<TraceReader, "inboxRecords">;

/**
 * The audit group's record of an event: its record item (an event on a stream), or its row that
 * keeps an unsequenced message whole; undefined until the group has handled the event.
 */
export async function auditRecord(
  store: AuditStore,
  eventId: string,
): Promise<AuditRecord | undefined> {
  const { state } = await store.load({ state: auditRecordRef(eventId) });
  const record = state?.data as AuditRecord | undefined;
  if (record?.event_id) return record;
  const [row] = await store.inboxRecords(AUDIT_GROUP, [eventId]);
  return row ? auditRecordOfRow(row) : undefined;
}

/**
 * The audit group's outcomes of these event ids, in the order asked, unknown ids left out: read
 * from its records, which stand in for its inbox rows.
 */
export async function auditedOutcomes(
  store: AuditStore,
  eventIds: readonly string[],
): Promise<InboxRecord[]> {
  const outcomes: InboxRecord[] = [];
  for (const eventId of eventIds) {
    const record = await auditRecord(store, eventId);
    if (record) outcomes.push(outcomeOfAuditRecord(record));
  }
  return outcomes;
}
