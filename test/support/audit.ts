import type { EventStore, InboxRecord } from "../../functions/core/ports";
import {
  type AuditRecord,
  auditRecordRef,
  outcomeOfAuditRecord,
} from "../../functions/roles/audit";

/**
 * The audit group's outcomes of these event ids, in the order asked, unknown ids left out: read
 * from its records, which stand in for its inbox rows.
 */
export async function auditedOutcomes(
  store: Pick<EventStore, "load">,
  eventIds: readonly string[],
): Promise<InboxRecord[]> {
  const outcomes: InboxRecord[] = [];
  for (const eventId of eventIds) {
    const { state } = await store.load({ state: auditRecordRef(eventId) });
    const record = state?.data as AuditRecord | undefined;
    if (record?.event_id) outcomes.push(outcomeOfAuditRecord(record));
  }
  return outcomes;
}
