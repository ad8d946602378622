import { RemovalPolicy } from "aws-cdk-lib";
import {
  AttributeType,
  BillingMode,
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
  LEGACY_STATE_INDEXES,
  TABLES,
  type TableLayout,
} from "../../../functions/adapters/dynamodb/layouts";
import {
  EventIndex,
  InboxIndex,
  LegacyStateIndex,
  SideEffectIndex,
  StateIndex,
} from "../../../functions/adapters/dynamodb/tables";
import { retentionDaysAt } from "../retention";

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
}

/** A stage of the list-index upgrade (stateIndexLayouts). */
export type ListIndexUpgrade = 1 | 2 | 3;

/** The upgrade stages, in the order they are deployed. */
export const LIST_INDEX_UPGRADE_STAGES: readonly ListIndexUpgrade[] = [1, 2, 3];

/** The list indexes each upgrade stage keeps, legacy and current (by-due is always there). */
const LIST_INDEXES_AT: Readonly<Record<ListIndexUpgrade, readonly string[]>> = {
  1: [LegacyStateIndex.byKind, LegacyStateIndex.byWaiting, StateIndex.byKind],
  2: [LegacyStateIndex.byKind, LegacyStateIndex.byWaiting, StateIndex.byKind, StateIndex.byWaiting],
  3: [LegacyStateIndex.byWaiting, StateIndex.byKind, StateIndex.byWaiting],
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
 * 4. (no stage) − by-waiting: the current layout.
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
  const current = [StateIndex.byKind, StateIndex.byWaiting];
  return stage === undefined
    ? current
    : [LegacyStateIndex.byKind, LegacyStateIndex.byWaiting, ...current];
}

/** Index names of the events table (declared with the table layout). */
export const EVENTS_INDEXES = EventIndex;

/** Index names of the inbox table: inbox rows and failure records of every group. */
export const INBOX_INDEXES = InboxIndex;

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
 *   operator's sparse list indexes `by-kind-listed` and `by-waiting-since` (keys only; while a
 *   stack upgrades, also the legacy ones its stage keeps: stateIndexLayouts); `ttl` only on an
 *   item that holds nothing but unsequenced ids, which expires with them.
 * - `events`: the event store and outbox (`pk` aggregate, `version`), stream NEW_IMAGE to the
 *   relay, indexes by correlation and by task for tracing.
 * - `inbox`: per-group dedup records (each group's outcome of each event), failure records and
 *   checkpoints (`pk`), expiring on `ttl`; indexes by correlation and by task for tracing.
 * - `side-effects`: idempotency keys of external actions (`effect_key`).
 */
export class AgentBusTables extends Construct {
  readonly state: Table;
  readonly events: Table;
  readonly inbox: Table;
  readonly sideEffects: Table;
  /** The list indexes the operator may query: the current ones, during an upgrade the legacy too. */
  readonly stateListIndexes: readonly string[];

  constructor(scope: Construct, id: string, props: AgentBusTablesProps = {}) {
    super(scope, id);
    const common: Omit<TableProps, "partitionKey"> = {
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: {
        pointInTimeRecoveryEnabled: true,
        recoveryPeriodInDays: retentionDaysAt(this, "backups"),
      },
      encryption: TableEncryption.AWS_MANAGED,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    };
    // Keys, indexes, stream and TTL come from the adapters' layout: one declaration of each.
    const stateIndexes = stateIndexLayouts(props.listIndexUpgrade);
    this.state = tableOf(this, "State", { ...TABLES.state, indexes: stateIndexes }, common);
    this.stateListIndexes = stateListIndexNames(props.listIndexUpgrade);
    this.events = tableOf(this, "Events", TABLES.events, common);
    this.inbox = tableOf(this, "Inbox", TABLES.inbox, common);
    this.sideEffects = tableOf(this, "SideEffects", TABLES.sideEffects, common);
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

  /** The ARN of each index of the events table (`<table arn>/index/<name>`). */
  eventsIndexArns(): string[] {
    return Object.values(EVENTS_INDEXES).map((name) => `${this.events.tableArn}/index/${name}`);
  }

  /** Read the events table's stream (for the relay's event source). */
  grantRelayStream(grantee: IGrantable): Grant {
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
    });
  }
  return table;
}
