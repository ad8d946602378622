import { Duration } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { Effect, PolicyStatement, StarPrincipal } from "aws-cdk-lib/aws-iam";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { Queue, QueueEncryption, QueuePolicy } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { PUSH_EVENT_RULES } from "../../../functions/front-door/a2a/push-events";
import { HUB_HANDLERS } from "../hub-handlers";
import { retentionAt } from "../retention";
import { queueDepth } from "./consumer-group-monitoring";
import { FIFO_QUEUE_SETTINGS } from "./consumer-group-queues";
import { AgentBusFunction } from "./function";
import type { DirectlyDelivered } from "./relay";
import type { AgentBusTables } from "./tables";

export interface A2aPushDeliveryProps {
  readonly tables: AgentBusTables;
  /** The stage the queues are named for (`agentbus-<stage>-a2a-push[-dlq].fifo`). */
  readonly stage: string;
}

/** What the relay and the queues call the push function's feed. */
export const A2A_PUSH_FEED = "a2a-push";

/** The names of the push queue and its dead-letter queue in `stage`. */
export function a2aPushQueueNames(stage: string): { queue: string; deadLetterQueue: string } {
  const name = `agentbus-${stage}-${A2A_PUSH_FEED}`;
  return { queue: `${name}.fifo`, deadLetterQueue: `${name}-dlq.fifo` };
}

/** Receives of a message (a run whose tables fail) before it waits in the dead-letter queue. */
const MAX_RECEIVES = 5;

/**
 * The A2A tasks' push notifications (functions/handlers/a2a-push.ts), for a stack that offers
 * agents over A2A: a function on a FIFO queue of its own, which the relay feeds (`Relay.deliverTo`:
 * this construct is a `DirectlyDelivered`) with the stored events that move a task
 * (functions/front-door/a2a/push-events.ts), each in its run's message group, so a task's
 * notifications keep their order and one run's failure holds up no other's (the mapping takes
 * `ReportBatchItemFailures`). Not a reader of the events table's stream: DynamoDB advises two a
 * shard, and the relay and a stream-delivered group are those.
 *
 * A queue and not a consumer group (`delivery: "relay"`): a group brings a buffer-less FIFO queue
 * too, but also the pipeline (inbox, version gate, state), a message-age and a rate alarm and the
 * operator's group commands, none of which a notifier that keeps no state and writes no event
 * needs: here 5 resources (the queue, its FIFO dead-letter queue, one TLS-only policy for both,
 * the mapping, the dead-letter alarm) where the stream mapping was 1.
 *
 * A message is received again only when its run's tables fail (a webhook's failure is recorded,
 * not thrown) or it is no stored event; after MAX_RECEIVES it waits in the dead-letter queue (kept
 * as long as the stack keeps dead letters), which alarms. The function reads the runs of A2A tasks
 * with push configs and each task's record on the state table, and writes the record (what it
 * delivered, what it gave up on): GetItem on `dag_run#*` and `a2a_push#*`, PutItem on
 * `a2a_push#*`, and the queue's receive and delete.
 */
export class A2aPushDelivery extends Construct implements DirectlyDelivered {
  readonly function: AgentBusFunction;
  readonly groupName = A2A_PUSH_FEED;
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
  readonly relayRules: Readonly<Record<string, unknown>> = PUSH_EVENT_RULES;
  /** Messages in the dead-letter queue. */
  readonly deadLetterAlarm: Alarm;

  constructor(scope: Construct, id: string, props: A2aPushDeliveryProps) {
    super(scope, id);
    const { tables } = props;
    // Three attempts of at most 5 s each, with 1 s and 2 s between them, for the slowest run.
    const timeout = Duration.seconds(60);
    this.function = new AgentBusFunction(this, "Function", {
      kind: "a2a-push",
      entry: HUB_HANDLERS["a2a-push"],
      serviceName: "a2a-push",
      description: "AgentBus A2A push notifications: the relay's push queue -> task webhooks",
      timeout,
      environment: { STATE_TABLE: tables.state.tableName },
    });
    const names = a2aPushQueueNames(props.stage);
    const queueProps = {
      ...FIFO_QUEUE_SETTINGS,
      encryption: QueueEncryption.SQS_MANAGED,
    };
    this.deadLetterQueue = new Queue(this, "DeadLetterQueue", {
      ...queueProps,
      queueName: names.deadLetterQueue,
      retentionPeriod: retentionAt(this, "deadLetterQueues"),
    });
    this.queue = new Queue(this, "Queue", {
      ...queueProps,
      queueName: names.queue,
      visibilityTimeout: Duration.seconds(timeout.toSeconds() * 6),
      retentionPeriod: retentionAt(this, "queues"),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: MAX_RECEIVES },
    });
    this.tlsOnly([this.queue, this.deadLetterQueue]);
    this.function.addEventSource(
      new SqsEventSource(this.queue, { batchSize: 10, reportBatchItemFailures: true }),
    );
    this.deadLetterAlarm = new Alarm(this, "DeadLetterAlarm", {
      metric: queueDepth(this.deadLetterQueue),
      threshold: 0,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `${A2A_PUSH_FEED}: runs whose tasks' states could not be read (the function's log: "will be received again"); their later states are still delivered. After the fix, aws sqs start-message-move-task --source-arn <the dead-letter queue's ARN>.`,
    });
    const items = (actions: string[], keys: string[]) =>
      new PolicyStatement({
        actions,
        resources: [tables.state.tableArn],
        conditions: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": keys } },
      });
    this.function.addToRolePolicy(items(["dynamodb:GetItem"], ["dag_run#*", "a2a_push#*"]));
    this.function.addToRolePolicy(items(["dynamodb:PutItem"], ["a2a_push#*"]));
  }

  /** One policy for both queues (one resource, not one each as `enforceSSL` makes): TLS only. */
  private tlsOnly(queues: readonly Queue[]): void {
    const policy = new QueuePolicy(this, "TlsOnly", { queues: [...queues] });
    policy.document.addStatements(
      new PolicyStatement({
        effect: Effect.DENY,
        principals: [new StarPrincipal()],
        actions: ["sqs:*"],
        resources: queues.map((q) => q.queueArn),
        conditions: { Bool: { "aws:SecureTransport": "false" } },
      }),
    );
  }
}
