import { Stack } from "aws-cdk-lib";
import type { ITable } from "aws-cdk-lib/aws-dynamodb";
import { type CfnRule, Match, Rule } from "aws-cdk-lib/aws-events";
import { SqsQueue } from "aws-cdk-lib/aws-events-targets";
import { Grant, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { FilterCriteria, FilterRule, StartingPosition } from "aws-cdk-lib/aws-lambda";
import { DynamoEventSource, SqsDlq, SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { CfnPipe } from "aws-cdk-lib/aws-pipes";
import type { IQueue, Queue } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import { EventAttr } from "../../../functions/adapters/dynamodb/tables";
import { RELAY_EVENT_SOURCE } from "../../../functions/adapters/eventbridge/publisher";
import { HUB_HANDLERS } from "../hub-handlers";
import type { ConsumerGroupSubscription } from "./consumer-group-props";
import type { GroupQueues } from "./consumer-group-queues";
import {
  type ConsumerGroupSettings,
  DISPATCH_BATCH_SIZE,
  DISPATCH_MAX_CONCURRENCY,
  DISPATCH_TIMEOUT,
  PIPE_BATCH_SIZE,
} from "./consumer-group-settings";
import { UNSEQUENCED_DETAIL } from "./consumer-group-subscribers";
import { AgentBusFunction } from "./function";
import { SOURCE_PREFIX } from "./topic";

/**
 * How events reach a group's consumer: a rule per subscribed topic; for a FIFO group the hop from
 * the buffer queue into the FIFO queue (a dispatch function or an EventBridge Pipe); and the
 * consumer's event source mapping on the group's queue. Everything is created in the group's
 * scope, under the construct ids the group has always had.
 */

/** What moves a FIFO group's buffer into its FIFO queue. */
export interface DeliveryHop {
  /** `delivery: "dispatch-function"`. */
  readonly dispatcher?: AgentBusFunction;
  /** `delivery: "pipe"`. */
  readonly pipe?: CfnPipe;
  /** The pipe's role: receive and delete on the buffer, send on the FIFO queue. */
  readonly pipeRole?: Role;
}

/**
 * One rule per subscription (`<Topic>Rule`), matching the subscribed types from `agentbus*`
 * sources (only unsequenced messages for a group that receives nothing else: `unsequencedOnly`). A FIFO group's rules deliver the whole event to the buffer queue; an unordered group's
 * deliver the whole event straight to its queue (the consumer reads the envelope from `detail`),
 * so an archive replay's `replay-name` reaches the consumer on every path. The target's dead
 * letters go to the buffer DLQ (FIFO) or the group's DLQ (unordered).
 */
export function createRules(
  scope: Construct,
  subscriptions: readonly ConsumerGroupSubscription[],
  settings: ConsumerGroupSettings,
  queues: GroupQueues,
): Rule[] {
  const retry = {
    retryAttempts: settings.ruleRetryAttempts,
    maxEventAge: settings.ruleMaxEventAge,
  };
  const target =
    queues.bufferQueue && queues.bufferDeadLetterQueue
      ? new SqsQueue(queues.bufferQueue, {
          deadLetterQueue: queues.bufferDeadLetterQueue,
          ...retry,
        })
      : new SqsQueue(queues.queue, { deadLetterQueue: queues.deadLetterQueue, ...retry });
  return subscriptions.map((subscription) => {
    const pattern = rulePatternOf(subscription.eventTypes, settings.unsequencedOnly);
    const rule = new Rule(scope, `${pascal(subscription.topic.topicName)}Rule`, {
      eventBus: subscription.topic.bus,
      description: `${settings.groupName}: ${subscription.eventTypes.join(", ")}`.slice(0, 512),
      eventPattern: {
        // A "relay" group's stored events come from the relay itself (../../../functions/core/
        // direct-delivery.ts): its rule takes every other source. A pattern cannot both match a
        // prefix and leave one value out, so it takes other sources than `agentbus*` too; the
        // dispatch function checks each envelope as on every path.
        source:
          settings.delivery === "relay"
            ? Match.anythingBut(RELAY_EVENT_SOURCE)
            : Match.prefix(SOURCE_PREFIX),
        detailType: pattern["detail-type"],
        ...(pattern.detail ? { detail: pattern.detail } : {}),
      },
      targets: [target],
    });
    // `Fn::GetAtt Name` instead of `Ref`: same value on AWS, and moto resolves it.
    (rule.node.defaultChild as CfnRule).eventBusName = subscription.topic.busName;
    return rule;
  });
}

/**
 * A group's rule pattern on one topic but its `source`, as EventBridge reads it: the subscribed
 * types as `detail-type`, and for a group that receives only unsequenced messages their `detail`.
 * The relay matches the stored events of a "relay" group against it (`DIRECT_GROUPS`).
 */
export function rulePatternOf(
  eventTypes: readonly string[],
  unsequencedOnly = false,
): { "detail-type": string[]; detail?: typeof UNSEQUENCED_DETAIL } {
  return {
    "detail-type": [...new Set(eventTypes)],
    ...(unsequencedOnly ? { detail: UNSEQUENCED_DETAIL } : {}),
  };
}

/** A group's pattern on one topic but its source (`rulePatternOf`). */
export type RulePattern = ReturnType<typeof rulePatternOf>;

/**
 * A group's rule patterns but their source, by topic (`rulePatternOf`), whatever carries them (a
 * rule, a new bus's subscriber); none for a group that reads the events table's stream. The stack
 * matches heartbeat types against them (../heartbeat-targets.ts); a "relay" group's are what the
 * relay matches the stored events it sends the group against (Relay.deliverTo).
 */
export function rulePatternsOf(
  subscriptions: readonly ConsumerGroupSubscription[],
  settings: ConsumerGroupSettings,
): Record<string, RulePattern> {
  if (settings.delivery === "stream") return {};
  return Object.fromEntries(
    subscriptions.map((s) => [
      s.topic.topicName,
      rulePatternOf(s.eventTypes, settings.unsequencedOnly),
    ]),
  );
}

/** The buffer -> FIFO queue hop of a FIFO group (none for an unordered group). */
export function createDeliveryHop(
  scope: Construct,
  settings: ConsumerGroupSettings,
  queues: GroupQueues,
  inbox: ITable,
): DeliveryHop {
  const { bufferQueue, bufferDeadLetterQueue } = queues;
  if (!bufferQueue || !bufferDeadLetterQueue) return {};
  if (settings.delivery === "pipe") return createPipe(scope, settings, bufferQueue, queues.queue);
  return {
    dispatcher: createDispatcher(
      scope,
      settings,
      bufferQueue,
      bufferDeadLetterQueue,
      queues.queue,
      inbox,
    ),
  };
}

/**
 * The consumer reads the group's queue in batches, with partial batch responses. A group read
 * from the stream reads its queue too (it holds only redriven dead letters), at most 10 a batch.
 */
export function addConsumerEventSource(
  consumer: AgentBusFunction,
  queue: Queue,
  settings: ConsumerGroupSettings,
): void {
  const stream = settings.delivery === "stream";
  // Consume grants include sqs:ChangeMessageVisibility, which the consumer's backoff uses.
  consumer.addEventSource(
    new SqsEventSource(queue, {
      batchSize: stream ? Math.min(settings.batchSize, 10) : settings.batchSize,
      maxBatchingWindow: stream ? undefined : settings.maxBatchingWindow,
      reportBatchItemFailures: true,
      maxConcurrency: settings.maxConcurrency,
    }),
  );
}

/**
 * Lambda's limit on one filter pattern of an event source mapping (characters of its JSON).
 * @see https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html
 */
export const MAX_FILTER_PATTERN_LENGTH = 4096;

/**
 * `delivery: "stream"`: the consumer reads the events table's stream, which the relay reads too.
 * Lambda's event filtering lets through only the INSERTs (new events) of the subscribed types, by
 * the item's `event_type`, so no other record invokes or bills the consumer. Batches of
 * `batchSize` (within `maxBatchingWindow`), one batch of a shard at a time (parallelization 1:
 * each event is an item, and the stream keeps order per item only, so more would let an
 * aggregate's versions overtake each other and cost gap repairs); on an error the batch is
 * retried from the first record the consumer reports failed, bisected, up to `maxReceiveCount`
 * times, then its stream positions go to the group's dead-letter queue. From the stream's oldest
 * record (24 hours): a new group folds what the stream still has, and the version gate reads the
 * older versions of each stream from the event store.
 */
export function addStreamEventSource(
  consumer: AgentBusFunction,
  events: ITable,
  eventTypes: readonly string[],
  settings: ConsumerGroupSettings,
  deadLetterQueue: IQueue,
): void {
  const filter = streamFilterOf(eventTypes);
  const length = JSON.stringify(filter).length;
  if (length > MAX_FILTER_PATTERN_LENGTH)
    throw new Error(
      `consumer group ${settings.groupName}: the stream filter of its ${eventTypes.length} event types is ${length} characters, Lambda allows ${MAX_FILTER_PATTERN_LENGTH} (deliver it through the bus instead)`,
    );
  consumer.addEventSource(
    new DynamoEventSource(events, {
      startingPosition: StartingPosition.TRIM_HORIZON,
      batchSize: settings.batchSize,
      maxBatchingWindow: settings.maxBatchingWindow,
      parallelizationFactor: 1,
      bisectBatchOnError: true,
      retryAttempts: settings.maxReceiveCount,
      reportBatchItemFailures: true,
      onFailure: new SqsDlq(deadLetterQueue),
      filters: [FilterCriteria.filter(filter)],
    }),
  );
  deadLetterQueue.grantSendMessages(consumer);
}

/** The filter pattern of a stream group: new items whose `event_type` is one it subscribes to. */
export function streamFilterOf(eventTypes: readonly string[]): Record<string, unknown> {
  return {
    eventName: FilterRule.isEqual("INSERT"),
    dynamodb: {
      NewImage: { [EventAttr.eventType]: { S: FilterRule.or(...new Set(eventTypes)) } },
    },
  };
}

/**
 * buffer -> dispatch function -> FIFO queue; what it cannot deliver goes to the buffer DLQ, with
 * a failure record in the inbox table (PutItem only) so a trace shows it. With
 * `tenantConcurrency` it keys the FIFO queue by tenant lane (`TENANT_CONCURRENCY`).
 */
function createDispatcher(
  scope: Construct,
  { groupName, inboxTtlDays, deliveryBatchingWindow, tenantConcurrency }: ConsumerGroupSettings,
  buffer: Queue,
  bufferDlq: Queue,
  target: Queue,
  inbox: ITable,
): AgentBusFunction {
  const dispatcher = new AgentBusFunction(scope, "Dispatcher", {
    kind: "dispatch",
    entry: HUB_HANDLERS.dispatch,
    group: groupName,
    serviceName: `${groupName}-dispatch`,
    description: `AgentBus ${groupName}: buffer queue -> FIFO queue`,
    timeout: DISPATCH_TIMEOUT,
    environment: {
      TARGET_QUEUE_URL: target.queueUrl,
      DEAD_LETTER_QUEUE_URL: bufferDlq.queueUrl,
      SOURCE_QUEUE_URL: buffer.queueUrl,
      GROUP_NAME: groupName,
      INBOX_TABLE: inbox.tableName,
      INBOX_TTL_DAYS: String(inboxTtlDays),
      ...(tenantConcurrency === undefined ? {} : { TENANT_CONCURRENCY: String(tenantConcurrency) }),
    },
  });
  dispatcher.addEventSource(
    new SqsEventSource(buffer, {
      batchSize: DISPATCH_BATCH_SIZE,
      maxBatchingWindow: deliveryBatchingWindow,
      reportBatchItemFailures: true,
      maxConcurrency: DISPATCH_MAX_CONCURRENCY,
    }),
  );
  target.grantSendMessages(dispatcher);
  bufferDlq.grantSendMessages(dispatcher);
  Grant.addToPrincipal({
    grantee: dispatcher,
    actions: ["dynamodb:PutItem"],
    resourceArns: [inbox.tableArn],
  });
  return dispatcher;
}

/**
 * buffer -> Pipe -> FIFO queue, with the message group and dedup id taken from the envelope
 * (`$.body` is the buffer message parsed as JSON: the EventBridge event) and the EventBridge event
 * forwarded as the message body (the consumer reads the envelope from `detail`, and an archive
 * replay's `replay-name` beside it). A message the pipe cannot deliver returns to the buffer and
 * ends in the buffer DLQ after `maxReceiveCount` receives.
 */
function createPipe(
  scope: Construct,
  { prefix: name, groupName, orderKey, deliveryBatchingWindow }: ConsumerGroupSettings,
  buffer: Queue,
  target: Queue,
): DeliveryHop {
  const stack = Stack.of(scope);
  const pipeArn = stack.formatArn({ service: "pipes", resource: "pipe", resourceName: name });
  const role = new Role(scope, "PipeRole", {
    description: `EventBridge Pipe ${name}: buffer queue -> FIFO queue`,
    assumedBy: new ServicePrincipal("pipes.amazonaws.com", {
      conditions: {
        StringEquals: { "aws:SourceAccount": stack.account, "aws:SourceArn": pipeArn },
      },
    }),
  });
  buffer.grant(role, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes");
  target.grant(role, "sqs:SendMessage");
  const pipe = new CfnPipe(scope, "Pipe", {
    name,
    description: `AgentBus ${groupName}: buffer queue -> FIFO queue, grouped by ${orderKey}`,
    desiredState: "RUNNING",
    roleArn: role.roleArn,
    source: buffer.queueArn,
    sourceParameters: {
      sqsQueueParameters: {
        batchSize: PIPE_BATCH_SIZE,
        maximumBatchingWindowInSeconds: deliveryBatchingWindow?.toSeconds(),
      },
    },
    target: target.queueArn,
    targetParameters: {
      inputTemplate: "<$.body>",
      sqsQueueParameters: {
        messageGroupId: `$.body.detail.${orderKey}`,
        messageDeduplicationId: "$.body.detail.event_id",
      },
    },
  });
  // The pipe checks its permissions when it is created: the role's policy must exist by then.
  pipe.node.addDependency(role);
  return { pipe, pipeRole: role };
}

function pascal(kebab: string): string {
  return kebab
    .split("-")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}
