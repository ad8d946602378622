import type { OutcomeRecord, StateReader } from "../../functions/core/ports";
import {
  AUDIT_GROUP,
  type AuditRecord,
  auditRecordRef,
  outcomeOfAuditRecord,
} from "../../functions/roles/audit";

/**
 * The audit group's outcomes, read from its records: the group writes no inbox row for an event
 * it applied (Role.selfRecorded), its audit record is the row. Undefined when the stack has no
 * audit group.
 */
export function auditOutcomes(
  groups: readonly string[],
  states: StateReader,
): ((eventIds: readonly string[]) => Promise<OutcomeRecord[]>) | undefined {
  if (!groups.includes(AUDIT_GROUP)) return undefined;
  return async (eventIds) => {
    const found = await states.loadStates(eventIds.map(auditRecordRef));
    return found.flatMap((state) => {
      const record = state.data as AuditRecord | undefined;
      return record?.event_id ? [outcomeOfAuditRecord(record)] : [];
    });
  };
}
