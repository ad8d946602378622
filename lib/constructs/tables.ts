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

export interface AgentBusTablesProps {
  /**
   * What happens to the tables when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
}

/** Index names of the events table. */
export const EVENTS_INDEXES = {
  byCorrelation: "by-correlation",
  byTask: "by-task",
  /** Sparse, keys only: one entry per stream (its first event), to list the streams of a type. */
  byStreamType: "by-stream-type",
} as const;

/** Index names of the inbox table (inbox rows and failure records of every group). */
export const INBOX_INDEXES = {
  byCorrelation: "by-correlation",
  byTask: "by-task",
} as const;

/** Index names of the state table. */
export const STATE_INDEXES = {
  /** Sparse: state items with due_shard/due_at (aggregates a sweeper must look at). */
  byDue: "by-due",
  /** Sparse: summarized states (runs, conversations, tasks) by kind, by updated_at. */
  byKind: "by-kind",
  /** Sparse: states waiting for a person, by what they wait for, by updated_at. */
  byWaiting: "by-waiting",
} as const;

/** What the state table's summary indexes project besides their keys. */
const SUMMARY_ATTRIBUTES = ["agg_type", "agg_id", "kind", "status", "label", "waiting", "counts"];

/** Index names of the side-effects table. */
export const SIDE_EFFECT_INDEXES = {
  /** Sparse: records whose outcome is unknown (a person must resolve them), by updated_at. */
  byOpenState: "by-open-state",
} as const;

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
 *   `by-due` (due_shard, due_at; keys only) of the aggregates a sweeper must look at.
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

  constructor(scope: Construct, id: string, props: AgentBusTablesProps = {}) {
    super(scope, id);
    const common: Omit<TableProps, "partitionKey"> = {
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: TableEncryption.AWS_MANAGED,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    };

    this.state = new Table(this, "State", {
      ...common,
      partitionKey: { name: "pk", type: AttributeType.STRING },
    });
    this.state.addGlobalSecondaryIndex({
      indexName: STATE_INDEXES.byDue,
      partitionKey: { name: "due_shard", type: AttributeType.STRING },
      sortKey: { name: "due_at", type: AttributeType.STRING },
      projectionType: ProjectionType.KEYS_ONLY,
    });
    for (const [indexName, attribute] of [
      [STATE_INDEXES.byKind, "kind"],
      [STATE_INDEXES.byWaiting, "waiting"],
    ] as const) {
      this.state.addGlobalSecondaryIndex({
        indexName,
        partitionKey: { name: attribute, type: AttributeType.STRING },
        sortKey: { name: "updated_at", type: AttributeType.STRING },
        projectionType: ProjectionType.INCLUDE,
        nonKeyAttributes: SUMMARY_ATTRIBUTES,
      });
    }

    this.events = new Table(this, "Events", {
      ...common,
      partitionKey: { name: "pk", type: AttributeType.STRING },
      sortKey: { name: "version", type: AttributeType.NUMBER },
      stream: StreamViewType.NEW_IMAGE,
    });
    this.events.addGlobalSecondaryIndex({
      indexName: EVENTS_INDEXES.byCorrelation,
      partitionKey: { name: "correlation_id", type: AttributeType.STRING },
      sortKey: { name: "event_id", type: AttributeType.STRING },
      projectionType: ProjectionType.ALL,
    });
    this.events.addGlobalSecondaryIndex({
      indexName: EVENTS_INDEXES.byTask,
      partitionKey: { name: "task_id", type: AttributeType.STRING },
      sortKey: { name: "event_id", type: AttributeType.STRING },
      projectionType: ProjectionType.ALL,
    });
    this.events.addGlobalSecondaryIndex({
      indexName: EVENTS_INDEXES.byStreamType,
      partitionKey: { name: "stream_type", type: AttributeType.STRING },
      sortKey: { name: "pk", type: AttributeType.STRING },
      projectionType: ProjectionType.KEYS_ONLY,
    });

    this.inbox = new Table(this, "Inbox", {
      ...common,
      partitionKey: { name: "pk", type: AttributeType.STRING },
      timeToLiveAttribute: "ttl",
    });
    for (const [indexName, attribute] of [
      [INBOX_INDEXES.byCorrelation, "correlation_id"],
      [INBOX_INDEXES.byTask, "task_id"],
    ] as const) {
      this.inbox.addGlobalSecondaryIndex({
        indexName,
        partitionKey: { name: attribute, type: AttributeType.STRING },
        sortKey: { name: "pk", type: AttributeType.STRING },
        projectionType: ProjectionType.ALL,
      });
    }

    this.sideEffects = new Table(this, "SideEffects", {
      ...common,
      partitionKey: { name: "effect_key", type: AttributeType.STRING },
    });
    this.sideEffects.addGlobalSecondaryIndex({
      indexName: SIDE_EFFECT_INDEXES.byOpenState,
      partitionKey: { name: "open_state", type: AttributeType.STRING },
      sortKey: { name: "updated_at", type: AttributeType.STRING },
      projectionType: ProjectionType.ALL,
    });
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

  /** The ARN of each index of the events table (`<table arn>/index/<name>`). */
  eventsIndexArns(): string[] {
    return Object.values(EVENTS_INDEXES).map((name) => `${this.events.tableArn}/index/${name}`);
  }

  /** Read the events table's stream (for the relay's event source). */
  grantRelayStream(grantee: IGrantable): Grant {
    return this.events.grantStreamRead(grantee);
  }
}
