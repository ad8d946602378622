import { type AggregateRef, type Envelope, type EventType, registry } from "../../../schemas";
import { outcomeRecord } from "../../core/commit";
import { defineRole } from "../../core/define-role";
import type { InboxRecord } from "../../core/ports";
import type { Role } from "../../core/role";

/**
 * One audit record per stored event the group was delivered: who produced it, what caused it,
 * where it sits in its stream. Written for every stored event until the group received only
 * unsequenced messages; kept, and read by the trace, as the records they are.
 */
export interface AuditRecord {
  readonly event_id: string;
  readonly event_type: string;
  readonly schema_version: number;
  readonly occurred_at: string;
  readonly recorded_at: string;
  readonly producer: string;
  readonly correlation_id: string;
  readonly causation_id: string | null;
  readonly task_id: string;
  readonly conversation_id?: string;
  readonly aggregate: { readonly type: string; readonly id: string; readonly version: number };
  readonly order_key: string;
  readonly expires_at?: string;
  /** The processing attempt that produced the event (1 on records written before it was kept). */
  readonly attempt?: number;
  /** The agent run that produced the event, when one did. */
  readonly run_id?: string;
  /**
   * The record itself copies no payload (it may hold private text). A message from outside a
   * stream is still kept whole, payload included, in the group's inbox row (`keepsMessages`),
   * which expires after 30 days, a heartbeat's after a day (functions/core/retention.ts).
   */
  readonly payload_bytes: number;
}

/**
 * The audit consumer: the record of what is stored nowhere else. It subscribes to every event
 * type in the registry but heartbeats (the hub's and every application's whose modules the process
 * imported; a heartbeat's record is the run it reports on, see `withEveryRegisteredType`), and its
 * rules match only unsequenced messages (`keepsMessages`: the stack sets the group's
 * `unsequencedOnly`), messages from outside any stream, which have no other copy: the group
 * keeps each whole, envelope and payload, in its inbox row, written once with one PutItem, where
 * the trace finds it by correlation (by task through the task's stored events or failure
 * records), for the retention functions/core/retention.ts declares (`auditMessages`,
 * `heartbeats`). A stored event is never delivered to it: the event store is its record, and a
 * trace finds it by id there (the events table's trace-by-digest index, from the correlation
 * digest its id carries; by-event-id for an event stored before), so nothing is delivered
 * twice to be stored twice. A stored event that still reaches it (the redrive of a dead letter
 * from before) gets the audit record below, as every stored event did before; a trace reads
 * those too. The operator's rebuild refuses the group: it keeps no stream's fold. It needs no
 * ordering, so its group uses a standard queue.
 */
export const AUDIT_GROUP = "audit";

/** Where the audit record of an event id is kept (a state item of its own). */
export function auditRecordRef(eventId: string): AggregateRef {
  return { type: "audit_record", id: `evt_${eventId}` };
}

/**
 * The audit group's outcome of the event an audit record records: applied when the record was
 * written. The record is the group's dedup and trace record: no inbox row is written.
 */
export function outcomeOfAuditRecord(record: AuditRecord): InboxRecord {
  // Kept as long as the record is, which holds ids and sizes, no personal data: it never expires.
  return outcomeRecord(AUDIT_GROUP, record, "applied", {
    recordedAt: record.recorded_at,
    expiresAt: Number.MAX_SAFE_INTEGER,
  });
}

/**
 * The audit role: unsequenced messages are kept by their row; `decide` records a stored event
 * that reaches it outside its rules (see above).
 */
export const audit = withEveryRegisteredType(
  defineRole<AuditRecord, EventType>({
    group: AUDIT_GROUP,
    subscriptions: [],
    stateOf: (event) => auditRecordRef(event.event_id),
    unordered: true,
    keepsMessages: true,
    decide(existing, event, { now }) {
      if (existing) return {};
      return { state: auditRecordOf(event, now.toISOString()) };
    },
  }),
);

/**
 * The role subscribed to every type the registry holds but heartbeats when its subscriptions are
 * read (by the topology, by its consumer), not when this file is evaluated: an application's types
 * are registered as its role modules are imported, which may be after it. Read again only once the
 * registry has grown, in the order the types were defined.
 *
 * A heartbeat (EventTypeDefinition.heartbeat: an agent's `node.started` and `node.heartbeat`) is
 * kept where it does its work, not here: the run it reports on records it on its timeline (when,
 * which node and generation, what type) and in the node's lease, the only things a heartbeat says
 * that matter. A second copy of every beat would cost a write, a queue hop and an invocation each.
 */
function withEveryRegisteredType<R extends Role<AuditRecord>>(role: R): R {
  let size = -1;
  let types: readonly string[] = [];
  return Object.defineProperty(role, "subscriptions", {
    enumerable: true,
    get() {
      if (registry.size !== size) {
        size = registry.size;
        types = [
          ...new Set(
            registry
              .definitions()
              .filter((d) => !d.heartbeat)
              .map((d) => d.type),
          ),
        ];
      }
      return types;
    },
  });
}

/** The audit record of an event, recorded at `recordedAt`. */
export function auditRecordOf(event: Envelope, recordedAt: string): AuditRecord {
  return {
    event_id: event.event_id,
    event_type: event.event_type,
    schema_version: event.schema_version,
    occurred_at: event.occurred_at,
    recorded_at: recordedAt,
    producer: event.producer,
    correlation_id: event.correlation_id,
    causation_id: event.causation_id,
    task_id: event.task_id,
    ...(event.conversation_id ? { conversation_id: event.conversation_id } : {}),
    aggregate: event.aggregate,
    order_key: event.order_key,
    ...(event.expires_at ? { expires_at: event.expires_at } : {}),
    attempt: event.attempt,
    ...(event.run_id ? { run_id: event.run_id } : {}),
    payload_bytes: new TextEncoder().encode(JSON.stringify(event.payload ?? null)).length,
  };
}

/** The audit record of an unsequenced message the group kept whole in its row (`keepsMessages`). */
export function auditRecordOfRow(row: InboxRecord): AuditRecord | undefined {
  return row.group === AUDIT_GROUP && row.envelope
    ? auditRecordOf(row.envelope, row.recordedAt)
    : undefined;
}
