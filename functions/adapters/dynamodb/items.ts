import { type AggregateRef, type Envelope, isTopic, type Topic } from "../../../schemas";
import { DEFAULT_TENANT } from "../../../schemas/ids";
import { carriesCorrelationDigest, digestOfEventId } from "../../core/event-ids";
import type {
  FailureRecord,
  GateRecords,
  InboxRecord,
  OutcomeRecord,
  RecordedOutcome,
  StateListing,
  StateSummary,
  StoredState,
  StreamHead,
} from "../../core/ports";
import {
  deflatedJson,
  envelopeOfItem,
  GATE_DEFLATE_OVER_BYTES,
  inflatedJson,
  storedEnvelope,
} from "./deflated-json";
import {
  checkpointKey,
  DUE_SHARD,
  EventAttr,
  failureKey,
  inboxKey,
  listedByTenant,
  streamKey,
  tenantListKey,
} from "./tables";

/**
 * The items of the AgentBus tables in plain JavaScript form (before marshalling) and their
 * conversions to and from the ports' records; the layout (keys, attributes, indexes) is in
 * ./tables.
 */

/** A state item before marshalling (`data` is absent when the state is `undefined`). */
export interface StateItem {
  readonly pk: string;
  readonly revision: number;
  readonly version: number;
  readonly data?: unknown;
  /** Instead of `data`, when its JSON is large: that JSON deflated (./deflated-json). */
  readonly data_z?: Uint8Array;
  readonly agg_type: string;
  readonly agg_id: string;
  readonly updated_at: string;
  readonly due_shard?: string;
  readonly due_at?: string;
  readonly kind?: string;
  readonly status?: string;
  readonly label?: string;
  readonly waiting?: string;
  readonly counts?: Readonly<Record<string, number>>;
  readonly tenant_id?: string;
  readonly listed_at?: string;
  readonly waiting_since?: string;
  readonly tenant_list?: string;
  readonly gate_checkpoints?: Readonly<Record<string, number>>;
  readonly gate_recent?: Readonly<Record<string, number>>;
  /** Instead of the two above, when their JSON is large: that JSON deflated (storedGate). */
  readonly gate_z?: Uint8Array;
  readonly gate_spilled_until?: number;
  readonly stream_correlation?: string;
  readonly stream_task?: string;
}

export interface EventItem {
  readonly pk: string;
  readonly version: number;
  /** The id, unless it carries its correlation's digest: then in `stored_id` (./tables EventAttr). */
  readonly event_id?: string;
  readonly stored_id?: string;
  /** The digest `stored_id` carries, on an event trace-by-digest holds (./tables EventAttr). */
  readonly trace_digest?: string;
  readonly event_type: string;
  readonly schema_version: number;
  /** The correlation, on an event the trace index holds; trace_correlation_id on any other. */
  readonly correlation_id?: string;
  readonly trace_correlation_id?: string;
  /** The task, on a task root (./tables isTaskRoot); trace_task_id on any other event. */
  readonly task_id?: string;
  readonly trace_task_id?: string;
  readonly occurred_at: string;
  /** The full envelope as JSON: what the relay publishes, byte for byte (or deflated: ./deflated-json). */
  readonly envelope?: string;
  readonly envelope_z?: Uint8Array;
  /** The aggregate type, on a stream's first event only (the by-stream-type index). */
  readonly stream_type?: string;
  /** The bus the relay publishes it to (./tables EventAttr.topic); absent on older events. */
  readonly topic?: Topic;
}

export interface InboxItem {
  readonly pk: string;
  readonly group: string;
  readonly event_id: string;
  readonly event_type: string;
  readonly outcome: RecordedOutcome;
  readonly reason?: string;
  readonly agg_type: string;
  readonly agg_id: string;
  readonly version: number;
  readonly correlation_id: string;
  /** The task, on a task root (a row of an unstored event); trace_task_id on any other row. */
  readonly task_id?: string;
  readonly trace_task_id?: string;
  readonly causation_id?: string;
  /** Absent on rows written before producers and times were recorded. */
  readonly producer?: string;
  readonly occurred_at?: string;
  readonly repaired?: boolean;
  readonly recorded_at: string;
  /**
   * Epoch seconds (InboxRecord.expiresAt): the table's TTL attribute; absent on a row that never
   * expires.
   */
  readonly ttl?: number;
  /** A message kept whole (InboxRecord.envelope), as an event item holds its envelope. */
  readonly envelope?: string;
  readonly envelope_z?: Uint8Array;
}

/** A failure record: the inbox row's fields with a failure outcome, the last error and attempts. */
export interface FailureItem extends Omit<InboxItem, "outcome" | "reason"> {
  readonly outcome: FailureRecord["outcome"];
  readonly error_code: string;
  readonly error_message: string;
  readonly attempts: number;
}

export interface CheckpointItem {
  readonly pk: string;
  readonly version: number;
}

/**
 * A state item. `options.compact`: the data may be stored deflated (storedData);
 * `options.streamHead`: the correlation and task of the stream's event at `version` (./tables
 * StateAttr.streamCorrelation), when known.
 */
export function stateItem(
  aggregate: AggregateRef,
  revision: number,
  version: number,
  data: unknown,
  updatedAt: Date,
  dueAt?: string | null,
  listed?: ListedSummary,
  gate?: GateRecords,
  options: { readonly compact?: boolean; readonly streamHead?: StreamHead } = {},
): StateItem {
  return {
    pk: streamKey(aggregate),
    revision,
    version,
    ...storedData(data, options.compact === true),
    agg_type: aggregate.type,
    agg_id: aggregate.id,
    updated_at: updatedAt.toISOString(),
    ...(options.streamHead !== undefined
      ? {
          stream_correlation: options.streamHead.correlation,
          stream_task: options.streamHead.task,
        }
      : {}),
    ...(typeof dueAt === "string" ? { due_shard: DUE_SHARD, due_at: dueAt } : {}),
    ...(listed ? listedAttributes(listed) : {}),
    ...(gate ? gateAttributes(gate) : {}),
  };
}

/** The gate records' attributes on a state item. */
function gateAttributes(gate: GateRecords) {
  return {
    ...storedGate(gate),
    ...(gate.spilledUntil !== undefined ? { gate_spilled_until: gate.spilledUntil } : {}),
  };
}

/**
 * The checkpoints and recent ids as two maps; or, once their JSON passes
 * GATE_DEFLATE_OVER_BYTES, that JSON deflated in `gate_z` (./deflated-json). Only AgentBus reads
 * them, and a state that follows many streams keeps many of them: the conversation view keeps
 * four per turn for its 50 turns, about 7 KB of map in an item written with every fact of a turn,
 * which deflates to a sixth (each turn's four checkpoints name the same task); after one turn,
 * its five take 258 bytes as maps and about 150 deflated.
 */
export function storedGate(
  gate: Pick<GateRecords, "checkpoints" | "recent">,
): Pick<StateItem, "gate_checkpoints" | "gate_recent" | "gate_z"> {
  const { checkpoints, recent } = gate;
  const deflated = deflatedJson(JSON.stringify({ checkpoints, recent }), GATE_DEFLATE_OVER_BYTES);
  return deflated ? { gate_z: deflated } : { gate_checkpoints: checkpoints, gate_recent: recent };
}

/** The checkpoints and recent ids an item holds, in whichever form (storedGate); none: undefined. */
function gateOf(item: StateItem): Pick<GateRecords, "checkpoints" | "recent"> | undefined {
  const json = inflatedJson(item.gate_z);
  if (json !== undefined) return JSON.parse(json) as Pick<GateRecords, "checkpoints" | "recent">;
  if (!item.gate_checkpoints && !item.gate_recent) return undefined;
  return { checkpoints: item.gate_checkpoints ?? {}, recent: item.gate_recent ?? {} };
}

/**
 * The state's data as a map, readable from the table by anyone; or, for a role whose states only
 * AgentBus reads (Role.compactState), as its JSON deflated when that is large (./deflated-json).
 */
function storedData(data: unknown, compact: boolean): Pick<StateItem, "data" | "data_z"> {
  if (data === undefined) return {};
  if (!compact) return { data };
  const deflated = deflatedJson(JSON.stringify(data));
  return deflated ? { data_z: deflated } : { data };
}

function dataOf(item: StateItem): unknown {
  const json = inflatedJson(item.data_z);
  return json === undefined ? item.data : JSON.parse(json);
}

/** A summarized state's summary and the keys of its entries in the operator's lists. */
export interface ListedSummary {
  readonly summary: StateSummary;
  readonly listing: StateListing;
}

/**
 * The summary's attributes and the lists' sort keys. `waiting` and `waiting_since` go together:
 * the listing's, which the summary's `waiting` set (functions/core/listing.ts).
 */
function listedAttributes({ summary, listing }: ListedSummary) {
  return {
    kind: summary.kind,
    status: summary.status,
    ...(summary.label !== undefined ? { label: summary.label } : {}),
    ...(summary.counts !== undefined ? { counts: summary.counts } : {}),
    ...(summary.tenant !== undefined ? { tenant_id: summary.tenant } : {}),
    listed_at: listing.listedAt,
    // A state whose role records no tenant is listed as the default tenant's, as the lists show it.
    ...(listedByTenant(summary.kind)
      ? {
          tenant_list: tenantListKey(
            summary.tenant ?? DEFAULT_TENANT,
            summary.kind,
            summary.status,
          ),
        }
      : {}),
    ...(listing.waiting !== undefined && listing.waitingSince !== undefined
      ? { waiting: listing.waiting, waiting_since: listing.waitingSince }
      : {}),
  };
}

/** The aggregate of a state item's key (`<type>#<id>`, the type has no `#`). */
export function aggregateOfKey(pk: string): AggregateRef {
  const at = pk.indexOf("#");
  if (at <= 0) throw new Error(`state key ${JSON.stringify(pk)} is not <type>#<id>`);
  return { type: pk.slice(0, at), id: pk.slice(at + 1) };
}

/** The item's list keys; an item summarized before they were written has none (listed anew). */
function listingOf(item: StateItem): { listing?: StateListing } {
  if (item.kind === undefined || item.listed_at === undefined) return {};
  const waiting =
    item.waiting !== undefined && item.waiting_since !== undefined
      ? { waiting: item.waiting, waitingSince: item.waiting_since }
      : {};
  return { listing: { listedAt: item.listed_at, ...waiting } };
}

export function storedStateOf(item: StateItem): StoredState {
  return {
    aggregate: { type: item.agg_type, id: item.agg_id },
    revision: item.revision,
    version: item.version,
    data: dataOf(item),
    ...(item.stream_correlation !== undefined && item.stream_task !== undefined
      ? {
          streamHead: {
            version: item.version,
            correlation: item.stream_correlation,
            task: item.stream_task,
          },
        }
      : {}),
    ...(item.due_at === undefined ? {} : { dueAt: item.due_at }),
    ...listingOf(item),
    ...gateRecordsOf(item),
  };
}

function gateRecordsOf(item: StateItem): Pick<StoredState, "gate"> {
  const gate = gateOf(item);
  if (!gate) return {};
  const spilled = item.gate_spilled_until;
  return { gate: spilled === undefined ? gate : { ...gate, spilledUntil: spilled } };
}

/**
 * An event's item; `root` (./tables isTaskRoot) puts its task in `task_id`, the sparse task-roots
 * index's key, else in `trace_task_id`. `runStart` (./tables startsRun) and `root` each put its
 * correlation in `correlation_id`, the sparse trace index's key (task-roots projects it), else it
 * is in `trace_correlation_id`. `topic`: the bus its type is published on (EventAttr.topic).
 * An id that carries the correlation's digest goes in `stored_id` (the digest indexes), with the
 * digest in `trace_digest` where the trace index holds the event; any other in `event_id`.
 */
export function eventItem(
  envelope: Envelope,
  root = true,
  runStart = true,
  topic?: Topic,
): EventItem {
  return {
    pk: streamKey(envelope.aggregate),
    version: envelope.aggregate.version,
    ...idAttributes(envelope, root || runStart),
    event_type: envelope.event_type,
    schema_version: envelope.schema_version,
    ...(root || runStart
      ? { correlation_id: envelope.correlation_id }
      : { trace_correlation_id: envelope.correlation_id }),
    ...taskAttribute(envelope.task_id, root),
    occurred_at: envelope.occurred_at,
    ...storedEnvelope(envelope),
    ...(envelope.aggregate.version === 1 ? { stream_type: envelope.aggregate.type } : {}),
    ...(topic !== undefined ? { topic } : {}),
  };
}

/**
 * Where an event item keeps its id: `stored_id` when the id carries the correlation's digest (and
 * the digest in `trace_digest` when the trace index holds the event), else `event_id`.
 */
function idAttributes(envelope: Envelope, traced: boolean) {
  if (!carriesCorrelationDigest(envelope.event_id, envelope.correlation_id))
    return { event_id: envelope.event_id };
  return {
    stored_id: envelope.event_id,
    ...(traced ? { trace_digest: digestOfEventId(envelope.event_id) } : {}),
  };
}

/**
 * The topic stored with an event's item (EventAttr.topic), if it names one: absent on events
 * stored before topics were, and then the reader looks the event's type up.
 */
export function storedTopicOf(item: Readonly<Record<string, unknown>>): Topic | undefined {
  const topic = item[EventAttr.topic];
  return isTopic(topic) ? topic : undefined;
}

/** The task of an item: in `task_id` on a task root, else in `trace_task_id` (./tables). */
function taskAttribute(task: string, root: boolean) {
  return root ? { task_id: task } : { trace_task_id: task };
}

export function inboxItem(record: InboxRecord): InboxItem {
  return {
    pk: inboxKey(record.group, record.eventId),
    group: record.group,
    event_id: record.eventId,
    event_type: record.eventType,
    outcome: record.outcome,
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    agg_type: record.aggregate.type,
    agg_id: record.aggregate.id,
    version: record.version,
    ...(record.repaired ? { repaired: true } : {}),
    // Never a task root: a trace by task finds the row through its task's stored events (their
    // correlations) or failure records, so each row enters one index, not two (./tables isTaskRoot).
    ...traceAttributes(record, false),
    ...(record.expiresAt === NEVER ? { ttl: undefined } : {}),
    ...(record.envelope ? storedEnvelope(record.envelope) : {}),
  };
}

/** InboxRecord.expiresAt of a row that never expires: stored without a TTL attribute. */
const NEVER = Number.MAX_SAFE_INTEGER;

/**
 * The attributes inbox rows and failure records share, in snake_case; the task as a task root's
 * (`root`) or not.
 */
function traceAttributes(record: InboxRecord | FailureRecord, root: boolean) {
  return {
    correlation_id: record.correlationId,
    ...taskAttribute(record.taskId, root),
    ...(record.causationId !== undefined ? { causation_id: record.causationId } : {}),
    producer: record.producer,
    occurred_at: record.occurredAt,
    recorded_at: record.recordedAt,
    ttl: record.expiresAt,
  };
}

export function failureItem(record: FailureRecord): FailureItem {
  return {
    pk: failureKey(record.group, record.eventId),
    group: record.group,
    event_id: record.eventId,
    event_type: record.eventType,
    outcome: record.outcome,
    agg_type: record.aggregate.type,
    agg_id: record.aggregate.id,
    version: record.version,
    error_code: record.error.code,
    error_message: record.error.message,
    attempts: record.attempts,
    // Always a root: its message may never have been stored (a malformed one, an unknown type).
    ...traceAttributes(record, true),
  };
}

/** The fields inbox rows and failure records share, in the port's camelCase. */
function traceFields(item: InboxItem | FailureItem) {
  return {
    group: item.group,
    eventId: item.event_id,
    eventType: item.event_type,
    aggregate: { type: item.agg_type, id: item.agg_id },
    version: item.version,
    correlationId: item.correlation_id,
    taskId: item.task_id ?? item.trace_task_id ?? "",
    ...(item.causation_id !== undefined ? { causationId: item.causation_id } : {}),
    producer: item.producer ?? "",
    occurredAt: item.occurred_at ?? item.recorded_at,
    recordedAt: item.recorded_at,
    expiresAt: item.ttl ?? NEVER,
  };
}

export function failureRecordOf(item: FailureItem): FailureRecord {
  return {
    ...traceFields(item),
    outcome: item.outcome,
    error: { code: item.error_code, message: item.error_message },
    attempts: item.attempts,
  };
}

/** An inbox row or failure record read from the inbox table's trace indexes. */
export function outcomeRecordOf(item: InboxItem | FailureItem): OutcomeRecord {
  return item.pk.startsWith("failure#")
    ? failureRecordOf(item as FailureItem)
    : inboxRecordOf(item as InboxItem);
}

export function inboxRecordOf(item: InboxItem): InboxRecord {
  return {
    ...traceFields(item),
    outcome: item.outcome,
    ...(item.reason !== undefined ? { reason: item.reason } : {}),
    ...(item.repaired ? { repaired: true as const } : {}),
    ...(item.envelope !== undefined || item.envelope_z !== undefined
      ? { envelope: envelopeOfItem(item as unknown as Record<string, unknown>) }
      : {}),
  };
}

export function checkpointItem(group: string, stream: AggregateRef, version: number) {
  return { pk: checkpointKey(group, stream), version } satisfies CheckpointItem;
}

/** True while an inbox row counts: TTL deletes lazily, so an expired row is ignored on read. */
export function inboxRowLive(item: Pick<InboxItem, "ttl">, now: Date): boolean {
  return item.ttl === undefined || item.ttl * 1000 > now.getTime();
}
