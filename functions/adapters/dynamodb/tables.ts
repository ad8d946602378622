import type { AggregateRef, Envelope } from "../../../schemas";
import type { StreamHead } from "../../core/ports";

/**
 * The DynamoDB table layout of AgentBus, in one place: key and attribute names, key builders,
 * index names and the item shapes (in plain JavaScript form, before marshalling). The event store
 * adapter, the CDK stack, the local runtime and the tests all build on these constants; the
 * tables' key schemas and indexes, which only the stack, the write meter and the tests need, are
 * in ./layouts.
 *
 * - state:        pk = `${type}#${id}`; revision, version, data, agg_type, agg_id, updated_at,
 *                 stream_correlation and stream_task (those of the stream's event at
 *                 `version`), and while the aggregate is due for a sweeper due_shard ("due")
 *                 and due_at (ISO); sparse GSI by-due (due_shard, due_at), projection
 *                 KEYS_ONLY. States a role summarizes (Role.summarize) also carry kind, status,
 *                 label, waiting, counts, tenant_id (where the role records a tenant),
 *                 listed_at (when first summarized) and, while waiting, waiting_since: sparse
 *                 GSIs by-kind-listed (kind, listed_at) and by-waiting-since (waiting,
 *                 waiting_since), KEYS_ONLY, the operator's lists; on workflow runs only
 *                 (listedByTenant) tenant_list (`<tenant>#<kind>#<status>`): sparse GSI
 *                 by-tenant-status (tenant_list, listed_at), KEYS_ONLY, one tenant's runs of
 *                 one status. Their keys stay put
 *                 while a state changes, so a write that keeps the kind, the status and what it
 *                 waits for writes no index entry; the lists read the summaries from the items.
 * - events:       pk = `${type}#${id}`, sk version (N); event_id (or stored_id: below),
 *                 event_type, schema_version,
 *                 correlation_id (or trace_correlation_id), occurred_at, envelope (the full
 *                 envelope JSON; or envelope_z, that JSON deflated, when it is large:
 *                 ./deflated-json), the task
 *                 (task_id on a task root, else trace_task_id: see EventAttr.taskId), and on
 *                 a stream's first event stream_type (sparse GSI by-stream-type: stream_type, pk;
 *                 keys only: one entry per stream, to list the streams of a type).
 *                 Sparse GSI trace-by-correlation (correlation_id, event_id; keys and the
 *                 task): an entry for each event that starts a run (startsRun: the first of a
 *                 stream's consecutive events in one correlation) or is a task root; any other
 *                 event carries its correlation as trace_correlation_id, and a trace reads it
 *                 with its run from the table (Query by stream key). Sparse GSI task-roots
 *                 (task_id, event_id; keys and correlation_id): where a task's correlations are
 *                 found. GSI by-event-id (event_id; keys and the correlation): the trace of
 *                 a stored event's id. Those three are keyed by event_id, which only an event
 *                 whose id does not carry its correlation's digest has (stored before ids did,
 *                 or minted elsewhere). The hub mints every stored event's id with that digest
 *                 in its last 8 characters (functions/core/event-ids.ts); such an event keeps
 *                 its id in stored_id and enters the digest indexes instead: sparse GSI
 *                 trace-by-digest (trace_digest, stored_id; keys, correlation_id and the task)
 *                 on the same events as trace-by-correlation, with trace_digest the digest, so
 *                 a trace by correlation reads its digest's partition and a trace by an event's
 *                 id the partition its id names; sparse GSI digest-task-roots (task_id,
 *                 stored_id; keys and correlation_id) as task-roots. No index holds every
 *                 event. Stream NEW_IMAGE (the outbox the relay reads).
 * - inbox:        pk = `inbox#${group}#${eventId}` (inbox rows, TTL attribute `ttl`),
 *                 pk = `failure#${group}#${eventId}` (failure records, TTL `ttl`) and
 *                 pk = `checkpoint#${group}#${type}#${id}` (checkpoint rows, `version`, no ttl).
 *                 GSI trace-by-correlation (correlation_id, pk; keys and the task) and sparse
 *                 task-roots (task_id, pk; keys and correlation_id), as in the events table:
 *                 every group's outcomes of a trace (checkpoint rows have neither key).
 * - side-effects: pk effect_key.
 */

/** Physical table names, injected from the environment / stack outputs. */
export interface TableNames {
  readonly state: string;
  readonly events: string;
  readonly inbox: string;
  readonly sideEffects: string;
}

/** Attribute names of the state table. */
export const StateAttr = {
  pk: "pk",
  revision: "revision",
  version: "version",
  data: "data",
  /** Instead of `data`, when its JSON is large: that JSON deflated (./deflated-json). */
  dataDeflated: "data_z",
  aggType: "agg_type",
  aggId: "agg_id",
  updatedAt: "updated_at",
  /** Partition of the sparse by-due index: DUE_SHARD while the aggregate is due, else absent. */
  dueShard: "due_shard",
  /** When the aggregate next needs a sweeper (ISO 8601), absent when not due. */
  dueAt: "due_at",
  /** The summary of a state its role summarizes (StateSummary), absent otherwise. */
  kind: "kind",
  status: "status",
  label: "label",
  waiting: "waiting",
  counts: "counts",
  /**
   * StateSummary.tenant, where the role records one. Not in STATE_SUMMARY_ATTRIBUTES: the legacy
   * list indexes project those, and a new projection would rebuild them.
   */
  tenant: "tenant_id",
  /** When the state was first summarized (ISO 8601): the by-kind-listed index's sort key. */
  listedAt: "listed_at",
  /** While `waiting` is set, since when it has had that value: by-waiting-since's sort key. */
  waitingSince: "waiting_since",
  /**
   * `<tenant>#<kind>#<status>` (tenantListKey) on a summarized state of a kind listedByTenant: the
   * by-tenant-status index's partition, so a list of one tenant's runs of one status is a Query,
   * not a look-through.
   */
  tenantList: "tenant_list",
  /** The consumer group's gate records (GateRecords): stream checkpoints and recent ids. */
  checkpoints: "gate_checkpoints",
  recent: "gate_recent",
  /**
   * Instead of `gate_checkpoints` and `gate_recent`, when their JSON is large: that JSON
   * (`{"checkpoints": ..., "recent": ...}`) deflated (./deflated-json). Only AgentBus reads them.
   */
  gateDeflated: "gate_z",
  /** GateRecords.spilledUntil: until when an id not in `gate_recent` may have a spilled row. */
  spilledUntil: "gate_spilled_until",
  /**
   * Only on an item that holds nothing but unsequenced ids (no data, no checkpoint: a message to
   * an aggregate that has no state): when the last of them expires, the table's TTL attribute.
   */
  ttl: "ttl",
  /**
   * The correlation and the task of the event at `version` in the aggregate's stream
   * (StoredState.streamHead), written with that version by the commit that appended it: whether
   * the next event appended starts a run (startsRun) and may be a task root (isTaskRoot). Absent
   * (a state written without them): the next event starts a run, and is a root if its cause says.
   */
  streamCorrelation: "stream_correlation",
  streamTask: "stream_task",
} as const;

/** Global secondary indexes of the state table. */
export const StateIndex = {
  /** Sparse: only state items with a due time (KEYS_ONLY: pk, due_shard, due_at). */
  byDue: "by-due",
  /** Sparse: summarized states by kind, by when they were first summarized (KEYS_ONLY). */
  byKind: "by-kind-listed",
  /** Sparse: states that wait for a person, by what they wait for and since when (KEYS_ONLY). */
  byWaiting: "by-waiting-since",
  /**
   * Sparse: workflow runs (listedByTenant) by tenant, kind and status (tenant_list), by when they
   * were first summarized (KEYS_ONLY). An entry moves only when the status changes.
   */
  byTenantStatus: "by-tenant-status",
} as const;

/**
 * The one kind of summarized state in by-tenant-status: workflow runs (the orchestrator's states),
 * the list operators filter by tenant and status. Conversations and tasks are many small states
 * whose status moves often; an entry for each would cost their writes a write of the index, and
 * their lists by tenant and status read the kind's list instead.
 */
export const TENANT_LISTED_KIND = "run";

/** Whether states of `kind` carry `tenant_list` (are in by-tenant-status). */
export function listedByTenant(kind: string): boolean {
  return kind === TENANT_LISTED_KIND;
}

/**
 * The by-tenant-status partition of a tenant's states of one kind and status. Tenant ids and kinds
 * have no `#` (schemas/ids.ts, Role.summarize), so the key names each part once.
 */
export function tenantListKey(tenant: string, kind: string, status: string): string {
  return `${tenant}#${kind}#${status}`;
}

/**
 * The operator's lists as stacks deployed before `listed_at` had them: sorted by `updated_at` and
 * projecting the summary, so every write of a summarized state moved its entries (a delete and a
 * put each). Kept only while such a stack upgrades (lib/infra/constructs/tables.ts), and read by the
 * operator's tools when the new indexes are not there yet.
 */
export const LegacyStateIndex = {
  byKind: "by-kind",
  byWaiting: "by-waiting",
} as const;

/** A summarized state's aggregate and summary (StateSummary): what the operator's lists show. */
export const STATE_SUMMARY_ATTRIBUTES = [
  StateAttr.aggType,
  StateAttr.aggId,
  StateAttr.kind,
  StateAttr.status,
  StateAttr.label,
  StateAttr.waiting,
  StateAttr.counts,
] as const;

/** The one partition of the by-due index. */
export const DUE_SHARD = "due";

/** Attribute names of the events table (event store + outbox). */
export const EventAttr = {
  pk: "pk",
  version: "version",
  /**
   * The event's id, on an event whose id does not carry its correlation's digest (one stored
   * before ids did, or minted elsewhere): the key of the legacy by-id indexes (LegacyEventIndex).
   * An event whose id carries it (carriesCorrelationDigest) has its id in `stored_id` instead, so
   * it enters none of them (eventIdOfItem reads either).
   */
  eventId: "event_id",
  /** The id of an event whose id carries its correlation's digest: the digest indexes' sort key. */
  storedId: "stored_id",
  /**
   * On an event with `stored_id` that the trace index holds (it starts a run, or is a task root):
   * the correlation digest its id carries (functions/core/event-ids.ts), the partition of
   * trace-by-digest, so a trace by the id finds the correlation's entries from the id alone.
   */
  traceDigest: "trace_digest",
  eventType: "event_type",
  schemaVersion: "schema_version",
  /**
   * The event's correlation, on an event the trace index holds (one that starts a run, startsRun,
   * or is a task root: task-roots projects it), and on every event stored before runs. Any other
   * event carries it as `trace_correlation_id`, in no index's key: a trace reads it with its run
   * (correlationOfItem reads either).
   */
  correlationId: "correlation_id",
  /** The event's correlation on an event the trace index does not hold. */
  traceCorrelationId: "trace_correlation_id",
  /**
   * The event's task, on a task root only (isTaskRoot), and on every event stored before task
   * roots: the key of the sparse task-roots index. Any other event carries its task as
   * `trace_task_id`, in no index's key: a task's events are found through its roots'
   * correlations, so each event enters one index, not two.
   */
  taskId: "task_id",
  /** The event's task on an event that is not a task root (taskOfItem reads either). */
  traceTaskId: "trace_task_id",
  occurredAt: "occurred_at",
  envelope: "envelope",
  /** Instead of `envelope`, when its JSON is large: that JSON deflated (./deflated-json). */
  envelopeDeflated: "envelope_z",
  /** Only on a stream's first event (version 1): the aggregate type, for the by-stream-type index. */
  streamType: "stream_type",
  /**
   * The topic whose bus the relay publishes the event to, as the registry of the function that
   * committed it defined its type: so the relay, which knows only the hub's own types, carries an
   * application's too. Absent on events stored before it was recorded (the relay looks the type
   * up) and on a type the committing function did not know.
   */
  topic: "topic",
  /**
   * On events stored before by-hour was dropped only: the hour of occurred_at in UTC
   * (`2026-11-30T17`), the legacy by-hour index's partition, and occurred_at in UTC, its sort key.
   */
  occurredHour: "occurred_hour",
  occurredUtc: "occurred_utc",
} as const;

/**
 * Global secondary indexes of the events table. The trace indexes hold keys (and the task, or the
 * correlation) only: a trace reads the runs their entries start from the table.
 *
 * An event whose id carries its correlation's digest (functions/core/event-ids.ts: the hub mints
 * every stored event's id so) enters trace-by-digest and digest-task-roots, keyed by `stored_id`;
 * any other event (stored before ids carried it, or with an id minted elsewhere) enters
 * trace-by-correlation, task-roots and by-event-id, keyed by `event_id`. Each event enters one of
 * the two sets; the readers read both.
 */
export const EventIndex = {
  /**
   * Sparse: events with `event_id` that start a run or are task roots, by correlation and event
   * id; projects the task (task_id, trace_task_id).
   */
  byCorrelation: "trace-by-correlation",
  /** Sparse: task roots with `event_id` (task_id), by task and event id; projects correlation_id. */
  taskRoots: "task-roots",
  /** Sparse (first events only, keys only): every stream of an aggregate type, by stream key. */
  byStreamType: "by-stream-type",
  /**
   * Every event with `event_id`, by its id; projects its correlation (correlation_id,
   * trace_correlation_id): where a trace by the id of an event stored before ids carried their
   * correlation's digest finds the event's correlation.
   */
  byEventId: "by-event-id",
  /**
   * Sparse: events with `stored_id` that start a run or are task roots, by the digest of their
   * correlation (trace_digest) and id; projects the correlation and the task. A trace by
   * correlation reads the digest's partition and keeps the correlation's entries; a trace by an
   * event's id reads the partition its id names and finds the correlation there.
   */
  traceByDigest: "trace-by-digest",
  /** Sparse: task roots with `stored_id` (task_id), by task and id; projects correlation_id. */
  digestTaskRoots: "digest-task-roots",
} as const;

/**
 * The events table's trace indexes (by-stream-type is not one: rebuild's). The inbox table has the
 * first two under the same names; the others are the events table's alone.
 */
export const EVENT_TRACE_INDEXES: readonly string[] = [
  EventIndex.byCorrelation,
  EventIndex.taskRoots,
  EventIndex.byEventId,
  EventIndex.traceByDigest,
  EventIndex.digestTaskRoots,
];

/** Attribute names of inbox rows (the InboxRecord fields in snake_case, plus the TTL). */
export const InboxAttr = {
  pk: "pk",
  group: "group",
  eventId: "event_id",
  eventType: "event_type",
  outcome: "outcome",
  reason: "reason",
  aggType: "agg_type",
  aggId: "agg_id",
  version: "version",
  correlationId: "correlation_id",
  /** As EventAttr.taskId: on a task root only (a row of an unstored event, a failure record). */
  taskId: "task_id",
  /** As EventAttr.traceTaskId: the task of a row that is not a task root. */
  traceTaskId: "trace_task_id",
  causationId: "causation_id",
  producer: "producer",
  occurredAt: "occurred_at",
  /** Inbox rows only: true when the event was read from the event store to fill a gap. */
  repaired: "repaired",
  recordedAt: "recorded_at",
  /**
   * Absent on a row that never expires: a message kept whole (Role.keepsMessages) before such
   * rows expired (functions/core/retention.ts).
   */
  ttl: "ttl",
  /**
   * A message kept whole (Role.keepsMessages): its envelope, as an event item holds one
   * (`envelope`, or `envelope_z` deflated: ./deflated-json).
   */
  envelope: "envelope",
  envelopeDeflated: "envelope_z",
  /**
   * True on the row of an id spilled from a state's recent ones (CommitRequest.spill): a dedup
   * record of `group`, `event_id` and `ttl` alone, in no index (it has no correlation or task),
   * read by its key.
   */
  spilled: "spilled",
  /** Failure records only: the last error and how many times the queue handed the message out. */
  errorCode: "error_code",
  errorMessage: "error_message",
  attempts: "attempts",
} as const;

/** Global secondary indexes of the inbox table (inbox rows and failure records), as EventIndex. */
export const InboxIndex = {
  byCorrelation: "trace-by-correlation",
  taskRoots: "task-roots",
} as const;

/**
 * The trace indexes as stacks deployed before task roots had them, in both the events and the
 * inbox table: by correlation and by task, each projecting the whole item, so every stored event
 * and every inbox row made two entries of its full size; and the events table's by-hour. Kept only
 * while such a stack upgrades (`agentbus:traceIndexUpgrade`, lib/infra/constructs/tables.ts); the
 * trace readers read the first two when the new indexes are not there yet.
 */
export const LegacyTraceIndex = {
  byCorrelation: "by-correlation",
  byTask: "by-task",
  /**
   * The events table's: keys only, the events of an hour by time, which republish read before it
   * read the stream; every event made an entry. Dropped last in the same upgrade.
   */
  byHour: "by-hour",
} as const;

/** The trace attributes the legacy indexes and the new ones project, to read a task from. */
export const TRACE_TASK_ATTRIBUTES = [EventAttr.taskId, EventAttr.traceTaskId] as const;

/** The attributes by-event-id projects, to read an event's correlation from (correlationOfItem). */
export const TRACE_CORRELATION_ATTRIBUTES = [
  EventAttr.correlationId,
  EventAttr.traceCorrelationId,
] as const;

/**
 * Whether a write that records `cause` (the event a consumer handled; undefined: none, a producer's
 * own append) makes an event of `task` and `correlation` a task root: unless the cause is a stored
 * event (version above 0: sequenced, so in the events table) of the same task and correlation, or
 * the event just before it in its stream (`previous`, when known: streamPredecessors) is of the
 * same task and correlation. Every task's part of a correlation with a stored event then has a
 * root: the first event stored in it had neither. A failure record is always a root (its message
 * may never have been stored); an inbox row never is: a trace by task finds the row of a message
 * that stored no event through its task's stored events (their correlations) or failure records.
 */
export function isTaskRoot(
  task: string,
  correlation: string,
  cause?: { readonly version: number; readonly taskId: string; readonly correlationId: string },
  previous?: StreamHead,
): boolean {
  if (previous && previous.task === task && previous.correlation === correlation) return false;
  return (
    cause === undefined ||
    !(cause.version > 0) ||
    cause.taskId !== task ||
    cause.correlationId !== correlation
  );
}

/** The task an event item or inbox item names (task_id on a root, else trace_task_id). */
export function taskOfItem(item: Record<string, unknown>): string {
  return String(item[EventAttr.taskId] ?? item[EventAttr.traceTaskId] ?? "");
}

/** The id of an event item (`event_id`, or `stored_id` when its id carries its digest). */
export function eventIdOfItem(item: Record<string, unknown>): string {
  return String(item[EventAttr.eventId] ?? item[EventAttr.storedId] ?? "");
}

/** The correlation an event item names (correlation_id when indexed, else trace_correlation_id). */
export function correlationOfItem(item: Record<string, unknown>): string {
  return String(item[EventAttr.correlationId] ?? item[EventAttr.traceCorrelationId] ?? "");
}

/**
 * The event just before each of the events one commit appends to a stream (in version order): the
 * one before it in the commit, or for the first of them `before`, the head of the same stream
 * (StoredState.streamHead), taken only when it is of the version just before; undefined when not
 * known, and for a stream's first event.
 */
export function streamPredecessors(
  events: readonly Envelope[],
  before?: StreamHead,
): (StreamHead | undefined)[] {
  return events.map((event, index) => {
    const version = event.aggregate.version;
    if (version <= 1) return undefined;
    const previous = index > 0 ? events[index - 1] : undefined;
    if (previous)
      return previous.aggregate.version === version - 1 &&
        streamKey(previous.aggregate) === streamKey(event.aggregate)
        ? { version: version - 1, correlation: previous.correlation_id, task: previous.task_id }
        : undefined;
    return before?.version === version - 1 ? before : undefined;
  });
}

/**
 * Whether an event starts a run: a stream's consecutive events in one correlation. It does when
 * the event before it in the stream (`previous`: streamPredecessors) has another correlation or
 * is not known. The trace index holds every event that starts a run, so a trace by correlation
 * finds each run from its first event and reads the rest of it from the table: between two events
 * that start runs, the events of a stream all have the correlation of the first.
 */
export function startsRun(event: Envelope, previous: StreamHead | undefined): boolean {
  return previous?.correlation !== event.correlation_id;
}

/**
 * Attribute names of checkpoint rows (in the inbox table, without a TTL). Checkpoints now live on
 * the state items; these rows are read only while a stack upgrades (`legacyCheckpoints`).
 */
export const CheckpointAttr = {
  pk: "pk",
  version: "version",
} as const;

/** Attribute names of the side-effects table. */
export const SideEffectAttr = {
  effectKey: "effect_key",
  /** "unknown" while the outcome is unknown (a person must resolve it), absent otherwise. */
  openState: "open_state",
  updatedAt: "updated_at",
} as const;

/** Global secondary indexes of the side-effects table. */
export const SideEffectIndex = {
  /** Sparse: records whose outcome is unknown, by updated_at. */
  byOpenState: "by-open-state",
} as const;

/** Partition key of an aggregate's state item and of its stream in the events table. */
export function streamKey(ref: AggregateRef): string {
  return `${ref.type}#${ref.id}`;
}

export function inboxKey(group: string, eventId: string): string {
  return `inbox#${group}#${eventId}`;
}

export function failureKey(group: string, eventId: string): string {
  return `failure#${group}#${eventId}`;
}

/** True for the key of a failure record (failureKey), in the inbox table beside the rows. */
export function isFailureKey(pk: string): boolean {
  return pk.startsWith("failure#");
}

export function checkpointKey(group: string, stream: AggregateRef): string {
  return `checkpoint#${group}#${stream.type}#${stream.id}`;
}
