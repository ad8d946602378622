import {
  EventAttr,
  EventIndex,
  InboxAttr,
  InboxIndex,
  LegacyStateIndex,
  LegacyTraceIndex,
  SideEffectAttr,
  SideEffectIndex,
  STATE_SUMMARY_ATTRIBUTES,
  StateAttr,
  StateIndex,
  type TableNames,
  TRACE_CORRELATION_ATTRIBUTES,
  TRACE_TASK_ATTRIBUTES,
} from "./tables";

/**
 * The key schemas, indexes, stream and TTL of the four tables (the layout ./tables names), for the
 * CDK stack, the write meter (../index-writes) and the tests. Apart from ./tables because no
 * function needs it: a bundler keeps an object literal that reads other constants' properties
 * even when nothing uses it, so in ./tables these layouts went into every function bundle.
 */

export type KeyType = "S" | "N" | "B";

export interface KeyAttribute {
  readonly name: string;
  readonly type: KeyType;
}

export interface IndexLayout {
  readonly name: string;
  readonly partitionKey: KeyAttribute;
  readonly sortKey?: KeyAttribute;
  /** ALL, KEYS_ONLY, or the keys plus the named attributes (INCLUDE). */
  readonly projection: "ALL" | "KEYS_ONLY" | { readonly include: readonly string[] };
}

export interface TableLayout {
  readonly partitionKey: KeyAttribute;
  readonly sortKey?: KeyAttribute;
  readonly indexes?: readonly IndexLayout[];
  readonly stream?: "NEW_IMAGE";
  readonly ttlAttribute?: string;
}

/** The summary attributes, projected by the legacy list indexes. */
const SUMMARY_PROJECTION = { include: STATE_SUMMARY_ATTRIBUTES } as const;

/** The legacy list indexes' layouts (LegacyStateIndex), while a stack upgrades. */
export const LEGACY_STATE_INDEXES: readonly IndexLayout[] = [
  {
    name: LegacyStateIndex.byKind,
    partitionKey: { name: StateAttr.kind, type: "S" },
    sortKey: { name: StateAttr.updatedAt, type: "S" },
    projection: SUMMARY_PROJECTION,
  },
  {
    name: LegacyStateIndex.byWaiting,
    partitionKey: { name: StateAttr.waiting, type: "S" },
    sortKey: { name: StateAttr.updatedAt, type: "S" },
    projection: SUMMARY_PROJECTION,
  },
];

/** The legacy indexes' layouts (LegacyTraceIndex) of the events table, while a stack upgrades. */
export const LEGACY_EVENT_TRACE_INDEXES: readonly IndexLayout[] = [
  {
    name: LegacyTraceIndex.byCorrelation,
    partitionKey: { name: EventAttr.correlationId, type: "S" },
    sortKey: { name: EventAttr.eventId, type: "S" },
    projection: "ALL",
  },
  {
    name: LegacyTraceIndex.byTask,
    partitionKey: { name: EventAttr.taskId, type: "S" },
    sortKey: { name: EventAttr.eventId, type: "S" },
    projection: "ALL",
  },
  {
    name: LegacyTraceIndex.byHour,
    partitionKey: { name: EventAttr.occurredHour, type: "S" },
    sortKey: { name: EventAttr.occurredUtc, type: "S" },
    projection: "KEYS_ONLY",
  },
];

/** The legacy trace indexes' layouts (LegacyTraceIndex) of the inbox table, while a stack upgrades. */
export const LEGACY_INBOX_TRACE_INDEXES: readonly IndexLayout[] = [
  {
    name: LegacyTraceIndex.byCorrelation,
    partitionKey: { name: InboxAttr.correlationId, type: "S" },
    sortKey: { name: InboxAttr.pk, type: "S" },
    projection: "ALL",
  },
  {
    name: LegacyTraceIndex.byTask,
    partitionKey: { name: InboxAttr.taskId, type: "S" },
    sortKey: { name: InboxAttr.pk, type: "S" },
    projection: "ALL",
  },
];

/** What the trace indexes project besides the keys: the task on one, the correlation on the other. */
const TASK_PROJECTION = { include: TRACE_TASK_ATTRIBUTES } as const;
const CORRELATION_PROJECTION = { include: [EventAttr.correlationId] } as const;
/** trace-by-digest's: the correlation (a trace keeps its own of a digest's entries) and the task. */
const DIGEST_PROJECTION = {
  include: [EventAttr.correlationId, ...TRACE_TASK_ATTRIBUTES],
} as const;

/**
 * Key schemas, indexes, stream and TTL of the four tables, and of the payment provider stand-in's
 * (iterate over a TableNames' keys, not over TABLES, for the four).
 */
export const TABLES = {
  state: {
    partitionKey: { name: StateAttr.pk, type: "S" },
    ttlAttribute: StateAttr.ttl,
    indexes: [
      {
        name: StateIndex.byDue,
        partitionKey: { name: StateAttr.dueShard, type: "S" },
        sortKey: { name: StateAttr.dueAt, type: "S" },
        projection: "KEYS_ONLY",
      },
      {
        name: StateIndex.byKind,
        partitionKey: { name: StateAttr.kind, type: "S" },
        sortKey: { name: StateAttr.listedAt, type: "S" },
        projection: "KEYS_ONLY",
      },
      {
        name: StateIndex.byWaiting,
        partitionKey: { name: StateAttr.waiting, type: "S" },
        sortKey: { name: StateAttr.waitingSince, type: "S" },
        projection: "KEYS_ONLY",
      },
      {
        name: StateIndex.byTenantStatus,
        partitionKey: { name: StateAttr.tenantList, type: "S" },
        sortKey: { name: StateAttr.listedAt, type: "S" },
        projection: "KEYS_ONLY",
      },
    ],
  },
  events: {
    partitionKey: { name: EventAttr.pk, type: "S" },
    sortKey: { name: EventAttr.version, type: "N" },
    indexes: [
      {
        name: EventIndex.byCorrelation,
        partitionKey: { name: EventAttr.correlationId, type: "S" },
        sortKey: { name: EventAttr.eventId, type: "S" },
        projection: TASK_PROJECTION,
      },
      {
        name: EventIndex.taskRoots,
        partitionKey: { name: EventAttr.taskId, type: "S" },
        sortKey: { name: EventAttr.eventId, type: "S" },
        projection: CORRELATION_PROJECTION,
      },
      {
        name: EventIndex.byStreamType,
        partitionKey: { name: EventAttr.streamType, type: "S" },
        sortKey: { name: EventAttr.pk, type: "S" },
        projection: "KEYS_ONLY",
      },
      {
        name: EventIndex.byEventId,
        partitionKey: { name: EventAttr.eventId, type: "S" },
        projection: { include: TRACE_CORRELATION_ATTRIBUTES },
      },
      {
        name: EventIndex.traceByDigest,
        partitionKey: { name: EventAttr.traceDigest, type: "S" },
        sortKey: { name: EventAttr.storedId, type: "S" },
        projection: DIGEST_PROJECTION,
      },
      {
        name: EventIndex.digestTaskRoots,
        partitionKey: { name: EventAttr.taskId, type: "S" },
        sortKey: { name: EventAttr.storedId, type: "S" },
        projection: CORRELATION_PROJECTION,
      },
    ],
    stream: "NEW_IMAGE",
  },
  inbox: {
    partitionKey: { name: InboxAttr.pk, type: "S" },
    ttlAttribute: InboxAttr.ttl,
    indexes: [
      {
        name: InboxIndex.byCorrelation,
        partitionKey: { name: InboxAttr.correlationId, type: "S" },
        sortKey: { name: InboxAttr.pk, type: "S" },
        projection: TASK_PROJECTION,
      },
      {
        name: InboxIndex.taskRoots,
        partitionKey: { name: InboxAttr.taskId, type: "S" },
        sortKey: { name: InboxAttr.pk, type: "S" },
        projection: CORRELATION_PROJECTION,
      },
    ],
  },
  sideEffects: {
    partitionKey: { name: SideEffectAttr.effectKey, type: "S" },
    indexes: [
      {
        name: SideEffectIndex.byOpenState,
        partitionKey: { name: SideEffectAttr.openState, type: "S" },
        sortKey: { name: SideEffectAttr.updatedAt, type: "S" },
        projection: "ALL",
      },
    ],
  },
  /**
   * Not an AgentBus table: the payment provider stand-in of the reference stack
   * (./payments-stand-in.ts), in no TableNames; a stack with a real provider has none.
   */
  paymentsStandIn: {
    partitionKey: { name: "pk", type: "S" },
  },
} as const satisfies Record<keyof TableNames, TableLayout> & Record<string, TableLayout>;
