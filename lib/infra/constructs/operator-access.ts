import { ArnFormat, Stack, Token, Validations } from "aws-cdk-lib";
import type { Archive, IEventBus } from "aws-cdk-lib/aws-events";
import { ManagedPolicy, PolicyStatement } from "aws-cdk-lib/aws-iam";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import type { ConsumerGroup } from "./consumer-group";
import type { CustomerKeys } from "./customer-keys";
import type { Relay } from "./relay";
import { type AgentBusTables, SIDE_EFFECT_INDEXES } from "./tables";

export interface OperatorReadAccessProps {
  readonly tables: AgentBusTables;
  /**
   * The customers' data keys: the read policy opens what trace shows, the repair policy erases.
   * @default - none
   */
  readonly customerKeys?: CustomerKeys;
  readonly groups: readonly ConsumerGroup[];
  readonly relay: Relay;
  /** Every topic's bus (republish puts stored events back on their own topic's bus). */
  readonly buses?: readonly IEventBus[];
  /**
   * The bus operator actions are recorded on (the audit topic's: `operator.*`, kept by the audit
   * group).
   */
  readonly auditBus?: IEventBus;
  /**
   * The bus operator commands go on (`agentbus reply approve | reject`, `agentbus send resolve`).
   * @default - none: the repair policy puts no commands
   */
  readonly commandBus?: IEventBus;
  /**
   * The topics' archives (`agentbus replay` starts replays from them).
   * @default - none: the repair policy starts no replay
   */
  readonly archives?: readonly Archive[];
  /**
   * How the names of `agentbus replay`'s replays start (`agentbus-<stage>-`): the repair policy may
   * describe those replays only.
   * @default - none: the repair policy describes no replay
   */
  readonly replayNamePrefix?: string;
}

/**
 * What `agentbus trace | status | dlq` and the console page read, as one managed policy to attach
 * to an operator's role: Query on the named indexes (the state table's list indexes, and during
 * a list-index upgrade the legacy ones too, which the tools fall back to: stateListIndexNames) and on the events table (one stream's newest events), GetItem /
 * BatchGetItem on the tables, peeking at the dead-letter queues (receive, then make visible
 * again), queue depths, CloudWatch metric data, and the customers' data keys to open the events'
 * personal fields with (GetItem / BatchGetItem, kms:Decrypt). No Scan, no writes, no deletes.
 */
export class OperatorReadAccess extends Construct {
  readonly policy: ManagedPolicy;
  /** What `agentbus dlq redrive` needs besides the reads (attach both to a repairing operator). */
  readonly repairPolicy: ManagedPolicy;

  constructor(scope: Construct, id: string, props: OperatorReadAccessProps) {
    super(scope, id);
    const { tables } = props;
    const index = (arn: string, name: string) => `${arn}/index/${name}`;
    const deadLetters = props.groups.flatMap((g) =>
      [g.deadLetterQueue, g.bufferDeadLetterQueue].filter((q): q is IQueue => q !== undefined),
    );
    const queues = props.groups.flatMap((g) =>
      [g.queue, g.bufferQueue].filter((q): q is NonNullable<typeof q> => q !== undefined),
    );
    this.policy = new ManagedPolicy(this, "Policy", {
      description: "AgentBus operator reads: trace, status, dead letters and the console page",
      statements: [
        new PolicyStatement({
          actions: ["dynamodb:Query"],
          resources: [
            tables.events.tableArn,
            ...tables.eventsIndexArns(),
            ...tables.inboxIndexArns(),
            ...tables.stateListIndexArns(),
            index(tables.sideEffects.tableArn, SIDE_EFFECT_INDEXES.byOpenState),
          ],
        }),
        new PolicyStatement({
          actions: ["dynamodb:GetItem", "dynamodb:BatchGetItem"],
          resources: [tables.state, tables.events, tables.inbox, tables.sideEffects].map(
            (t) => t.tableArn,
          ),
        }),
        new PolicyStatement({
          actions: ["sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"],
          resources: deadLetters.map((q) => q.queueArn),
        }),
        new PolicyStatement({
          actions: ["sqs:GetQueueAttributes"],
          resources: [...queues.map((q) => q.queueArn), props.relay.failureQueue.queueArn],
        }),
        new PolicyStatement({ actions: ["cloudwatch:GetMetricData"], resources: ["*"] }),
        ...(props.customerKeys?.operatorStatements("read") ?? []),
      ],
    });
    this.repairPolicy = repairPolicy(this, props, deadLetters);
    acknowledgeReplayNames(this.repairPolicy, props.replayNamePrefix, "replay");
    if (props.groups.some((g) => g.subscribers.length > 0))
      acknowledgeReplayNames(this.repairPolicy, props.replayNamePrefix, "subscriber");
    Validations.of(this.policy).acknowledge({
      id: "AwsSolutions-IAM5[Resource::*]",
      reason:
        'Resource "*" only for cloudwatch:GetMetricData, which has no resource-level permissions (the queue ages and the relay\'s iterator age are read with it); every other statement names its tables, indexes and queues',
    });
  }
}

/**
 * Dead-letter redrive: move messages from the dead-letter queues (receive, delete, change
 * visibility) back to the queue they came from (send), and record the action on the audit bus;
 * decisions on what waits for a person (held replies, unknown send outcomes) put on the commands
 * bus; stops and resumes of tenants and runs (`agentbus stop | resume`, their items on the state
 * table); erasure (`agentbus erase`, lib/operator/erase.ts): the customer's key removed from the
 * customer-keys table, and the plain copies in state items overwritten (UpdateItem on the state
 * table, PutItem on its content items: the agents' stored messages; it finds them with the reads
 * of the read policy).
 */
function repairPolicy(
  scope: Construct,
  props: OperatorReadAccessProps,
  deadLetters: readonly IQueue[],
): ManagedPolicy {
  const targets = props.groups.flatMap((g) =>
    [g.queue, g.bufferQueue].filter((q): q is NonNullable<typeof q> => q !== undefined),
  );
  return new ManagedPolicy(scope, "RepairPolicy", {
    description:
      "AgentBus operator repairs: dead-letter redrive, republish, resolutions; recorded in the audit trail",
    statements: [
      new PolicyStatement({
        actions: ["sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage"],
        resources: deadLetters.map((q) => q.queueArn),
      }),
      stopStatement(props),
      new PolicyStatement({
        actions: ["sqs:SendMessage"],
        resources: targets.map((q) => q.queueArn),
      }),
      ...republishStatements(props),
      ...replayStatements(scope, props),
      ...erasureStatements(props),
    ],
  });
}

/** `agentbus stop | resume`: the stop items of tenants and runs on the state table. */
function stopStatement(props: OperatorReadAccessProps): PolicyStatement {
  return new PolicyStatement({
    actions: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
    resources: [props.tables.state.tableArn],
    conditions: {
      "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["operator_stop#*"] },
    },
  });
}

/**
 * republish and replay's estimate: the events of a window or of a failure record, found in the
 * events table's stream (its ARN from DescribeTable) and read from the outbox by key, the relay's
 * failure records taken, and the events put on their buses (with the commands and the audit
 * record on theirs).
 */
function republishStatements(props: OperatorReadAccessProps): PolicyStatement[] {
  const buses = [...new Set([props.auditBus, props.commandBus, ...(props.buses ?? [])])].flatMap(
    (b) => (b ? [b.eventBusArn] : []),
  );
  const events = props.tables.events;
  return [
    new PolicyStatement({
      actions: ["dynamodb:DescribeTable", "dynamodb:BatchGetItem"],
      resources: [events.tableArn],
    }),
    new PolicyStatement({
      actions: ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"],
      resources: [events.tableStreamArn ?? events.tableArn],
    }),
    new PolicyStatement({
      actions: ["sqs:ReceiveMessage", "sqs:DeleteMessage"],
      resources: [props.relay.failureQueue.queueArn],
    }),
    ...(buses.length > 0
      ? [new PolicyStatement({ actions: ["events:PutEvents"], resources: buses })]
      : []),
  ];
}

/**
 * `agentbus erase` and sealed commands, on a stack that keeps customers' keys: the key's
 * statements, and the state items written again (the agents' stored messages among them).
 */
function erasureStatements(props: OperatorReadAccessProps): PolicyStatement[] {
  if (!props.customerKeys) return [];
  return [
    ...props.customerKeys.operatorStatements("erase"),
    // A command's personal fields (a held reply's edited text, a reason) are sealed.
    ...props.customerKeys.operatorStatements("seal"),
    new PolicyStatement({
      actions: ["dynamodb:UpdateItem"],
      resources: [props.tables.state.tableArn],
    }),
    // The agents' stored messages (content items) are written again, erased.
    new PolicyStatement({
      actions: ["dynamodb:PutItem"],
      resources: [props.tables.state.tableArn],
      conditions: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["content#*"] } },
    }),
  ];
}

/** `agentbus replay`: from the archives, and to the groups delivered by subscribers. */
function replayStatements(scope: Construct, props: OperatorReadAccessProps): PolicyStatement[] {
  return [...archiveReplayStatements(scope, props), ...subscriberReplayStatements(scope, props)];
}

/**
 * Archive replay (`agentbus replay`): read each group rule's pattern (the dry run's estimate), read
 * the archives' retention and start replays from them, and follow the replays it started, whose
 * names start with the stage's prefix (they are derived from the window at run time, so the ARN
 * ends in `*`). No ListReplays: it has no resource-level permission, and the tool does not need it.
 */
function archiveReplayStatements(
  scope: Construct,
  props: OperatorReadAccessProps,
): PolicyStatement[] {
  const archives = (props.archives ?? []).map((a) => a.archiveArn);
  if (archives.length === 0 || !props.replayNamePrefix) return [];
  const rules = props.groups.flatMap((g) => g.rules.map((r) => r.ruleArn));
  return [
    new PolicyStatement({
      actions: ["events:DescribeArchive", "events:StartReplay"],
      resources: archives,
    }),
    // A stack whose groups are all delivered by subscribers has no rule.
    ...(rules.length > 0
      ? [new PolicyStatement({ actions: ["events:DescribeRule"], resources: rules })]
      : []),
    new PolicyStatement({
      actions: ["events:DescribeReplay"],
      resources: [replayArnPattern(scope, props.replayNamePrefix)],
    }),
  ];
}

/**
 * Replay to a group delivered by a subscriber of a new bus (`agentbus replay`, a point-in-time
 * subscriber: lib/operator/replay.ts): describe the group's live subscriber and its bus (its
 * retention), list the bus's subscribers (to find one already created), create the replay's subscriber, authorized on the bus
 * and on the pending subscriber's ARN, whose name the stage's prefix starts (its ARN ends in a
 * wildcard), and pass the group's delivery role to it (aws/agent-toolkit-for-aws,
 * amazon-eventbridge-event-bus/references/authorization.md, "Creating things on a bus").
 */
function subscriberReplayStatements(
  scope: Construct,
  props: OperatorReadAccessProps,
): PolicyStatement[] {
  const groups = props.groups.filter((g) => g.subscribers.length > 0 && g.subscriberRole);
  if (groups.length === 0 || !props.replayNamePrefix) return [];
  const subscribers = groups.flatMap((g) => g.subscribers);
  const buses = [...new Set(subscribers.map((s) => s.eventBusArn))];
  return [
    new PolicyStatement({
      actions: ["events:DescribeSubscriber"],
      resources: subscribers.map((s) => s.attrSubscriberArn),
    }),
    new PolicyStatement({
      actions: ["events:DescribeEventBus", "events:ListSubscribers", "events:CreateSubscriber"],
      resources: buses,
    }),
    new PolicyStatement({
      actions: ["events:CreateSubscriber"],
      resources: [eventsArnPattern(scope, "subscriber", props.replayNamePrefix)],
    }),
    new PolicyStatement({
      actions: ["iam:PassRole"],
      resources: groups.flatMap((g) => (g.subscriberRole ? [g.subscriberRole.roleArn] : [])),
      conditions: { StringEquals: { "iam:PassedToService": "events.amazonaws.com" } },
    }),
  ];
}

/** The ARN of every replay whose name starts with `prefix`. */
export function replayArnPattern(scope: Construct, prefix: string): string {
  return eventsArnPattern(scope, "replay", prefix);
}

/** The ARN of every EventBridge `resource` (replay, subscriber) whose name starts with `prefix`. */
function eventsArnPattern(scope: Construct, resource: string, prefix: string): string {
  return Stack.of(scope).formatArn({
    service: "events",
    resource,
    resourceName: `${prefix}*`,
    arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
  });
}

/**
 * The wildcard of the replays' (or the replay subscribers') ARNs, acknowledged under the id
 * cdk-nag reports it with: the ARN as written, with `<AWS::Partition>`, `<AWS::Region>` and
 * `<AWS::AccountId>` where the stack's environment leaves them open.
 */
function acknowledgeReplayNames(
  policy: ManagedPolicy,
  prefix: string | undefined,
  resource: "replay" | "subscriber",
): void {
  if (!prefix) return;
  const stack = Stack.of(policy);
  const part = (value: string, pseudo: string) =>
    Token.isUnresolved(value) ? `<AWS::${pseudo}>` : value;
  const arn = `arn:${part(stack.partition, "Partition")}:events:${part(stack.region, "Region")}:${part(stack.account, "AccountId")}:${resource}/${prefix}*`;
  const action = resource === "replay" ? "events:DescribeReplay" : "events:CreateSubscriber";
  Validations.of(policy).acknowledge({
    id: `AwsSolutions-IAM5[Resource::${arn}]`,
    reason: `${action} on the ${resource}s named ${prefix}*: agentbus replay names each replay from its window and groups at run time, so no ARN can be written down before; the prefix keeps it to this stage's replays`,
  });
}
