import { RemovalPolicy } from "aws-cdk-lib";
import {
  AttributeType,
  ProjectionType,
  StreamViewType,
  Table,
  TableEncryption,
  type TableProps,
} from "aws-cdk-lib/aws-dynamodb";
import { Grant, type IGrantable } from "aws-cdk-lib/aws-iam";
import { Construct } from "constructs";
import {
  type IndexLayout,
  type KeyAttribute,
  LEGACY_EVENT_TRACE_INDEXES,
  LEGACY_INBOX_TRACE_INDEXES,
  LEGACY_STATE_INDEXES,
  TABLES,
  type TableLayout,
} from "../../../functions/adapters/dynamodb/layouts";
import {
  EVENT_TRACE_INDEXES,
  EventIndex,
  InboxIndex,
  LegacyStateIndex,
  LegacyTraceIndex,
  SideEffectIndex,
  StateIndex,
} from "../../../functions/adapters/dynamodb/tables";
import { retentionDaysAt } from "../retention";
import {
  autoScale,
  billingProps,
  indexCapacityProps,
  resolveCapacity,
  type TablesCapacity,
} from "./table-capacity";

export interface AgentBusTablesProps {
  /**
   * What happens to the tables when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * The stage of a stack deployed with the legacy list indexes (`by-kind`, `by-waiting`) that
   * upgrades to `by-kind-listed` and `by-waiting-since` (see stateIndexLayouts).
   * @default - no upgrade: the state table has the current indexes only
   */
  readonly listIndexUpgrade?: ListIndexUpgrade;
  /**
   * The stage of a stack deployed with the legacy trace indexes (`by-correlation`, `by-task`,
   * projecting all, in the events and the inbox table) that upgrades to `trace-by-correlation` and
   * `task-roots` (see traceIndexLayouts).
   * @default - no upgrade: the events and inbox tables have the current indexes only
   */
  readonly traceIndexUpgrade?: TraceIndexUpgrade;
  /**
   * How the tables are billed for reads and writes (./table-capacity).
   * @default "on-demand"
   */
  readonly capacity?: TablesCapacity;
}

/** A stage of the trace-index upgrade (traceIndexLayouts). */
export type TraceIndexUpgrade = 1 | 2 | 3 | 4 | 5 | 6 | 7;

/** The upgrade stages, in the order they are deployed. */
export const TRACE_INDEX_UPGRADE_STAGES: readonly TraceIndexUpgrade[] = [1, 2, 3, 4, 5, 6, 7];

/** The trace indexes each upgrade stage keeps, legacy and current (a table has those it has). */
const TRACE_INDEXES_AT: Readonly<Record<TraceIndexUpgrade, readonly string[]>> = {
  1: [
    LegacyTraceIndex.byCorrelation,
    LegacyTraceIndex.byTask,
    LegacyTraceIndex.byHour,
    EventIndex.byCorrelation,
  ],
  2: [
    LegacyTraceIndex.byCorrelation,
    LegacyTraceIndex.byTask,
    LegacyTraceIndex.byHour,
    EventIndex.byCorrelation,
    EventIndex.taskRoots,
  ],
  3: [
    LegacyTraceIndex.byTask,
    LegacyTraceIndex.byHour,
    EventIndex.byCorrelation,
    EventIndex.taskRoots,
  ],
  4: [LegacyTraceIndex.byHour, EventIndex.byCorrelation, EventIndex.taskRoots],
  5: [EventIndex.byCorrelation, EventIndex.taskRoots],
  6: [EventIndex.byCorrelation, EventIndex.taskRoots, EventIndex.byEventId],
  7: [
    EventIndex.byCorrelation,
    EventIndex.taskRoots,
    EventIndex.byEventId,
    EventIndex.traceByDigest,
  ],
};

/**
 * The names of the trace indexes (InboxIndex names the inbox table's first two the same; the
 * others are the events table's alone).
 */
const TRACE_INDEX_NAMES: readonly string[] = EVENT_TRACE_INDEXES;

/** The trace indexes of the inbox table, and the legacy ones an upgrading one may still have. */
const INBOX_TRACE_INDEX_NAMES: readonly string[] = [
  ...Object.values(InboxIndex),
  LegacyTraceIndex.byCorrelation,
  LegacyTraceIndex.byTask,
];

/**
 * The events or inbox table's indexes at a stage of the trace-index upgrade; without a stage, the
 * current layout (TABLES.events, TABLES.inbox).
 *
 * A trace moved from `by-correlation` and `by-task` (each projecting the whole item, so every
 * stored event and inbox row made two entries of its full size) to `trace-by-correlation` (every
 * item, keys and task only) and the sparse `task-roots` (keys and correlation: where a task's
 * correlations are found), and republish from the events table's `by-hour` (an entry per event) to
 * the table's stream. A projection cannot change in place, and CloudFormation creates or deletes
 * at most one GSI of a table per stack update, so a stack deployed with the legacy indexes gets
 * there in six deploys, each one create or one delete in a table (in each of the two, the first
 * four):
 *
 * 1. + trace-by-correlation (DynamoDB fills it from the items: no backfill);
 * 2. + task-roots (filled from `task_id`, which every item stored before has);
 * 3. − by-correlation;
 * 4. − by-task;
 * 5. − by-hour, from the events table;
 * 6. + by-event-id, in the events table (filled from `event_id`, which every event stored
 *    before has);
 * 7. + trace-by-digest, in the events table (filled from `trace_digest` and `stored_id`: the
 *    events stored since ids carry their correlation's digest, which enter none of the three
 *    indexes keyed by `event_id`);
 * 8. (no stage) + digest-task-roots (`task_id`, `stored_id`): the current layout. A stack deployed
 *    with by-event-id gets there in two deploys (7, then none); in between, a trace by task finds
 *    no task whose roots' ids carry a digest, until digest-task-roots is filled.
 *
 * The readers query a new index and read its legacy counterpart while the table lacks it. Order:
 * the legacy indexes the stage keeps, then the current ones (the others always).
 */
export function traceIndexLayouts(
  table: "events" | "inbox",
  stage?: TraceIndexUpgrade,
): readonly IndexLayout[] {
  const current: readonly IndexLayout[] = TABLES[table].indexes;
  if (stage === undefined) return current;
  const legacy = table === "events" ? LEGACY_EVENT_TRACE_INDEXES : LEGACY_INBOX_TRACE_INDEXES;
  const kept = (index: IndexLayout) =>
    !TRACE_INDEX_NAMES.includes(index.name) || TRACE_INDEXES_AT[stage].includes(index.name);
  return [
    ...legacy.filter((index) => TRACE_INDEXES_AT[stage].includes(index.name)),
    ...current.filter(kept),
  ];
}

/**
 * The trace indexes the readers may query at a stage: the current ones, and during an upgrade the
 * legacy ones as well (a Query IAM refuses never says the index is missing).
 */
export function traceIndexNames(stage?: TraceIndexUpgrade): string[] {
  return stage === undefined
    ? [...TRACE_INDEX_NAMES]
    : [LegacyTraceIndex.byCorrelation, LegacyTraceIndex.byTask, ...TRACE_INDEX_NAMES];
}

/** A stage of the list-index upgrade (stateIndexLayouts). */
export type ListIndexUpgrade = 1 | 2 | 3 | 4;

/** The upgrade stages, in the order they are deployed. */
export const LIST_INDEX_UPGRADE_STAGES: readonly ListIndexUpgrade[] = [1, 2, 3, 4];

/** The list indexes each upgrade stage keeps, legacy and current (by-due is always there). */
const LIST_INDEXES_AT: Readonly<Record<ListIndexUpgrade, readonly string[]>> = {
  1: [LegacyStateIndex.byKind, LegacyStateIndex.byWaiting, StateIndex.byKind],
  2: [LegacyStateIndex.byKind, LegacyStateIndex.byWaiting, StateIndex.byKind, StateIndex.byWaiting],
  3: [LegacyStateIndex.byWaiting, StateIndex.byKind, StateIndex.byWaiting],
  4: [StateIndex.byKind, StateIndex.byWaiting],
};

/**
 * The state table's indexes at a stage of the list-index upgrade; without a stage, the current
 * layout (TABLES.state).
 *
 * The operator's lists moved from `by-kind` and `by-waiting` (sorted by `updated_at`, projecting
 * the summary) to `by-kind-listed` and `by-waiting-since` (sorted by `listed_at` and
 * `waiting_since`, keys only). A GSI's key schema cannot change in place, and CloudFormation
 * creates or deletes at most one GSI per stack update, so a stack deployed with the legacy
 * indexes gets there in four deploys, each one create or one delete:
 *
 * 1. by-due, by-kind, by-waiting, + by-kind-listed (then `agentbus lists backfill` sets
 *    `listed_at` and `waiting_since` on the states that lack them);
 * 2. + by-waiting-since (built from the backfilled `waiting_since`);
 * 3. − by-kind;
 * 4. − by-waiting;
 * 5. (no stage) + by-tenant-status (keyed by `tenant_list`, which the commit writes on runs; then
 *    `agentbus lists backfill` again, for the runs written before).
 *
 * A stack that already has by-kind-listed and by-waiting-since gets by-tenant-status in one
 * deploy (one create), then the backfill.
 *
 * Order: by-due, then the legacy indexes the stage keeps, then the current ones.
 */
export function stateIndexLayouts(stage?: ListIndexUpgrade): readonly IndexLayout[] {
  const current: readonly IndexLayout[] = TABLES.state.indexes;
  if (stage === undefined) return current;
  const kept = (index: IndexLayout) => LIST_INDEXES_AT[stage].includes(index.name);
  return [
    ...current.filter((index) => index.name === StateIndex.byDue),
    ...LEGACY_STATE_INDEXES.filter(kept),
    ...current.filter(kept),
  ];
}

/**
 * The list indexes the operator's tools may query at a stage: the current ones, and during an
 * upgrade the legacy ones as well, whichever the stage has. The tools query a current index first
 * and read the legacy one when the table does not have it yet, so the current names must be
 * allowed before they exist (a Query IAM refuses never says the index is missing).
 */
export function stateListIndexNames(stage?: ListIndexUpgrade): string[] {
  const current = [StateIndex.byKind, StateIndex.byWaiting, StateIndex.byTenantStatus];
  return stage === undefined
    ? current
    : [LegacyStateIndex.byKind, LegacyStateIndex.byWaiting, ...current];
}

/** Index names of the events table (declared with the table layout). */
export const EVENTS_INDEXES = EventIndex;

/** Index names of the state table. */
export const STATE_INDEXES = StateIndex;

/** Index names of the side-effects table. */
export const SIDE_EFFECT_INDEXES = SideEffectIndex;

/**
 * Actions a consumer needs on each table. `TransactWriteItems` and `TransactGetItems` are not IAM
 * actions: a transaction is authorized per item as PutItem / UpdateItem / ConditionCheckItem /
 * GetItem on the table it touches.
 */
const CONSUMER_ACTIONS = {
  state: [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:ConditionCheckItem",
  ],
  inbox: [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:ConditionCheckItem",
  ],
  events: [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:ConditionCheckItem",
  ],
  sideEffects: [
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:ConditionCheckItem",
  ],
} as const;

/**
 * The stateful part of AgentBus: four DynamoDB tables, on demand, with point-in-time recovery and
 * AWS-managed encryption.
 *
 * - `state`: one item per aggregate (`pk`), written conditionally on its version; sparse index
 *   `by-due` (due_shard, due_at; keys only) of the aggregates a sweeper must look at; the
 *   operator's sparse list indexes `by-kind-listed`, `by-waiting-since` and `by-tenant-status`
 *   (keys only; while a
 *   stack upgrades, also the legacy ones its stage keeps: stateIndexLayouts); `ttl` only on an
 *   item that holds nothing but unsequenced ids, which expires with them.
 * - `events`: the event store and outbox (`pk` aggregate, `version`), stream NEW_IMAGE to the
 *   relay, trace indexes by correlation digest and of task roots, and those keyed by `event_id`
 *   that hold the events stored before ids carried the digest (while a stack upgrades, also the
 *   legacy ones its stage keeps: traceIndexLayouts).
 * - `inbox`: per-group dedup records (each group's outcome of each event), failure records and
 *   checkpoints (`pk`), expiring on `ttl`; the same two trace indexes.
 * - `side-effects`: idempotency keys of external actions (`effect_key`).
 */
export class AgentBusTables extends Construct {
  readonly state: Table;
  readonly events: Table;
  readonly inbox: Table;
  readonly sideEffects: Table;
  /** The list indexes the operator may query: the current ones, during an upgrade the legacy too. */
  readonly stateListIndexes: readonly string[];
  /** The trace indexes a reader may query: the current ones, during an upgrade the legacy too. */
  readonly traceIndexes: readonly string[];
  /** The events table's indexes as deployed (with the legacy ones an upgrade's stage keeps). */
  private readonly eventsIndexes: readonly IndexLayout[];

  constructor(scope: Construct, id: string, props: AgentBusTablesProps = {}) {
    super(scope, id);
    const capacity = resolveCapacity(props.capacity);
    const common: Omit<TableProps, "partitionKey"> = {
      ...billingProps(capacity),
      pointInTimeRecoverySpecification: {
        pointInTimeRecoveryEnabled: true,
        recoveryPeriodInDays: retentionDaysAt(this, "backups"),
      },
      encryption: TableEncryption.AWS_MANAGED,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    };
    // Keys, indexes, stream and TTL come from the adapters' layout: one declaration of each.
    const table = (id: string, layout: TableLayout) => tableOf(this, id, layout, common, capacity);
    const stateIndexes = stateIndexLayouts(props.listIndexUpgrade);
    this.state = table("State", { ...TABLES.state, indexes: stateIndexes });
    this.stateListIndexes = stateListIndexNames(props.listIndexUpgrade);
    const stage = props.traceIndexUpgrade;
    this.eventsIndexes = traceIndexLayouts("events", stage);
    this.events = table("Events", { ...TABLES.events, indexes: this.eventsIndexes });
    const inboxIndexes = traceIndexLayouts("inbox", stage);
    this.inbox = table("Inbox", { ...TABLES.inbox, indexes: inboxIndexes });
    this.traceIndexes = traceIndexNames(stage);
    this.sideEffects = table("SideEffects", TABLES.sideEffects);
    const scaled = (id: string, of: Table, indexes: readonly IndexLayout[] = []) => ({
      id,
      table: of,
      indexNames: indexes.map((index) => index.name),
    });
    autoScale(
      this,
      [
        scaled("State", this.state, stateIndexes),
        scaled("Events", this.events, this.eventsIndexes),
        scaled("Inbox", this.inbox, inboxIndexes),
        scaled("SideEffects", this.sideEffects, TABLES.sideEffects.indexes),
      ],
      capacity,
    );
  }

  /**
   * What a consumer group's function needs: read and conditionally write state and inbox items
   * (alone or in a transaction), read and append events, query the events table's two indexes
   * (named: no `index/*`), and read and write side-effect records. No scans, no deletes.
   *
   * The grants name each table (and index) instead of using `Table.grant`, which adds
   * `<table>/index/*` for every action once a table has an index.
   */
  grantConsumer(grantee: IGrantable): Grant {
    const onTable = (table: Table, actions: readonly string[]) =>
      Grant.addToPrincipal({ grantee, actions: [...actions], resourceArns: [table.tableArn] });
    return onTable(this.state, CONSUMER_ACTIONS.state)
      .combine(onTable(this.inbox, CONSUMER_ACTIONS.inbox))
      .combine(onTable(this.events, CONSUMER_ACTIONS.events))
      .combine(
        Grant.addToPrincipal({
          grantee,
          actions: ["dynamodb:Query"],
          resourceArns: this.eventsIndexArns(),
        }),
      )
      .combine(onTable(this.sideEffects, CONSUMER_ACTIONS.sideEffects));
  }

  /**
   * What the lease sweeper needs: Query on the state table's by-due index (named, not
   * `index/*`) and GetItem / BatchGetItem of state items. No writes, no scans.
   */
  grantSweeper(grantee: IGrantable): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: ["dynamodb:Query"],
      resourceArns: [this.stateDueIndexArn()],
    }).combine(
      Grant.addToPrincipal({
        grantee,
        actions: ["dynamodb:GetItem", "dynamodb:BatchGetItem"],
        resourceArns: [this.state.tableArn],
      }),
    );
  }

  /** The ARN of the state table's by-due index. */
  stateDueIndexArn(): string {
    return `${this.state.tableArn}/index/${STATE_INDEXES.byDue}`;
  }

  /** The ARN of each of the state table's list indexes (stateListIndexes), for the operator. */
  stateListIndexArns(): string[] {
    return this.stateListIndexes.map((name) => `${this.state.tableArn}/index/${name}`);
  }

  /**
   * The ARN of each index of the events table (`<table arn>/index/<name>`), with the trace
   * indexes a reader may query (traceIndexes).
   */
  eventsIndexArns(): string[] {
    const names = new Set([...this.eventsIndexes.map((i) => i.name), ...this.traceIndexes]);
    return [...names].map((name) => `${this.events.tableArn}/index/${name}`);
  }

  /** The ARN of each trace index of the inbox table a reader may query (traceIndexes). */
  inboxIndexArns(): string[] {
    return this.traceIndexes
      .filter((name) => INBOX_TRACE_INDEX_NAMES.includes(name))
      .map((name) => `${this.inbox.tableArn}/index/${name}`);
  }

  /**
   * The ARN of each trace index of the events table a reader of a task's or a correlation's events
   * may query (traceIndexes but by-event-id, which only a trace by event id reads).
   */
  eventsTraceIndexArns(): string[] {
    return this.traceIndexes
      .filter((name) => name !== EventIndex.byEventId)
      .map((name) => `${this.events.tableArn}/index/${name}`);
  }

  /** Read the events table's stream (the event sources of the relay and of stream groups). */
  grantEventsStream(grantee: IGrantable): Grant {
    return this.events.grantStreamRead(grantee);
  }
}

const ATTRIBUTE_TYPES = {
  S: AttributeType.STRING,
  N: AttributeType.NUMBER,
  B: AttributeType.BINARY,
};

const keyOf = (key: KeyAttribute) => ({ name: key.name, type: ATTRIBUTE_TYPES[key.type] });

/** A table from its layout (functions/adapters/dynamodb/tables.ts): keys, stream, TTL, indexes. */
function tableOf(
  scope: Construct,
  id: string,
  layout: TableLayout,
  common: Omit<TableProps, "partitionKey">,
  capacity: ReturnType<typeof resolveCapacity>,
): Table {
  const table = new Table(scope, id, {
    ...common,
    partitionKey: keyOf(layout.partitionKey),
    ...(layout.sortKey ? { sortKey: keyOf(layout.sortKey) } : {}),
    ...(layout.stream ? { stream: StreamViewType.NEW_IMAGE } : {}),
    ...(layout.ttlAttribute ? { timeToLiveAttribute: layout.ttlAttribute } : {}),
  });
  for (const index of layout.indexes ?? []) {
    const projection =
      index.projection === "ALL"
        ? { projectionType: ProjectionType.ALL }
        : index.projection === "KEYS_ONLY"
          ? { projectionType: ProjectionType.KEYS_ONLY }
          : {
              projectionType: ProjectionType.INCLUDE,
              nonKeyAttributes: [...index.projection.include],
            };
    table.addGlobalSecondaryIndex({
      indexName: index.name,
      partitionKey: keyOf(index.partitionKey),
      ...(index.sortKey ? { sortKey: keyOf(index.sortKey) } : {}),
      ...projection,
      ...indexCapacityProps(capacity),
    });
  }
  return table;
}
