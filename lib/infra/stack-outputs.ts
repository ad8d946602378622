import { Aws, CfnOutput } from "aws-cdk-lib";
import type { Construct } from "constructs";
import { STACK_WORKFLOWS_OUTPUT } from "../../functions/core/stack-workflows";
import type { AlarmTopic } from "./constructs/alarm-topic";
import type { ConsumerGroup } from "./constructs/consumer-group";
import type { CustomerKeys } from "./constructs/customer-keys";
import type { FrontDoor } from "./constructs/front-door";
import type { OperatorReadAccess } from "./constructs/operator-access";
import type { Relay } from "./constructs/relay";
import type { AgentBusTables } from "./constructs/tables";
import type { Topic } from "./constructs/topic";
import { outputId } from "./output-ids";

/** The parts of an AgentBus stack (lib/infra/agentbus-stack) whose names and ARNs are output. */
export interface OutputSources extends Construct {
  readonly topics: ReadonlyMap<string, Topic>;
  readonly groups: readonly ConsumerGroup[];
  readonly relay: Relay;
  readonly operatorAccess: OperatorReadAccess;
  readonly tables: AgentBusTables;
  readonly customerKeys: CustomerKeys;
  readonly frontDoor?: FrontDoor;
  readonly alarmTopic: AlarmTopic;
  /** The stack's workflows as JSON (functions/core/stack-workflows.ts); none when not given any. */
  readonly stackWorkflows?: string;
}

type OutputFn = (id: string, value: string, description: string) => CfnOutput;

/**
 * What a deployment needs to be used and operated: every bus name and ARN and archive ARN, every
 * queue and dead-letter queue URL and rule ARN of every group, the relay's failure queue, the
 * table names and the Region (each integration adds its own: lib/infra/integration-infra.ts). No exports: nothing may come to depend on this stack through CloudFormation
 * imports.
 */
export function addStackOutputs(stack: OutputSources): void {
  const output = (id: string, value: string, description: string) =>
    new CfnOutput(stack, id, { value, description });
  for (const topic of stack.topics.values()) topicOutputs(topic, output);
  for (const group of stack.groups) groupOutputs(group, output);
  otherOutputs(stack, output);
  output(
    "AlarmTopicArn",
    stack.alarmTopic.topic.topicArn,
    "SNS topic every alarm notifies: subscribe a person (e-mail, a chat webhook) to it",
  );
}

/** A topic's bus name and ARN, and its archive's ARN (what agentbus replay replays from). */
function topicOutputs(topic: Topic, output: OutputFn): void {
  const id = outputId(topic.topicName);
  output(`${id}BusName`, topic.busName, `EventBridge bus of the ${topic.topicName} topic`);
  output(`${id}BusArn`, topic.busArn, `${topic.topicName}: the bus's ARN (replay destination)`);
  if (topic.archive)
    output(
      `${id}ArchiveArn`,
      topic.archive.archiveArn,
      `${topic.topicName}: the bus's archive (agentbus replay replays from it)`,
    );
}

/**
 * A group's queue, dead-letter queue and (FIFO groups) buffer queue URLs, and the ARN of its rule
 * on each topic it subscribes to (`<Group><Topic>RuleArn`: a replay's filter names the rules), or
 * of its subscriber on the topic's new bus (`<Group><Topic>SubscriberArn`).
 */
function groupOutputs(group: ConsumerGroup, output: OutputFn): void {
  const id = group.node.id;
  const name = group.groupName;
  for (const rule of group.rules)
    output(`${id}${rule.node.id}Arn`, rule.ruleArn, `${name}: its rule on a topic's bus`);
  for (const subscriber of group.subscribers)
    output(
      `${id}${subscriber.node.id}Arn`,
      subscriber.attrSubscriberArn,
      `${name}: its subscriber on a topic's new bus (a replay copies it)`,
    );
  output(`${id}QueueUrl`, group.queue.queueUrl, `${name}: the consumer's queue`);
  output(
    `${id}DeadLetterQueueUrl`,
    group.deadLetterQueue.queueUrl,
    `${name}: dead-letter queue of the consumer's queue`,
  );
  if (group.bufferQueue) {
    output(
      `${id}BufferQueueUrl`,
      group.bufferQueue.queueUrl,
      `${name}: buffer queue the rules deliver to`,
    );
  }
  if (group.bufferDeadLetterQueue) {
    output(
      `${id}BufferDeadLetterQueueUrl`,
      group.bufferDeadLetterQueue.queueUrl,
      `${name}: dead letters of the rules and the buffer (undeliverable or invalid events)`,
    );
  }
}

/** The relay, the tables, the operator policies, the front door and the stack's workflows. */
function otherOutputs(stack: OutputSources, output: OutputFn): void {
  if (stack.stackWorkflows !== undefined)
    output(
      STACK_WORKFLOWS_OUTPUT,
      stack.stackWorkflows,
      "the workflows the stack was given (JSON): agentbus workflow list, show and start read them",
    );
  output(
    "Region",
    Aws.REGION,
    "the Region the stack is deployed in (agentbus --outputs acts there unless --region says otherwise)",
  );
  output(
    "RelayFailureQueueUrl",
    stack.relay.failureQueue.queueUrl,
    "relay: stream batches given up on",
  );
  output(
    "RelayFunctionName",
    stack.relay.function.functionName,
    "relay: its function (agentbus status reads its IteratorAge)",
  );
  output(
    "OperatorReadPolicyArn",
    stack.operatorAccess.policy.managedPolicyArn,
    "attach to an operator's role: what agentbus trace, status, dlq and console read",
  );
  output(
    "OperatorRepairPolicyArn",
    stack.operatorAccess.repairPolicy.managedPolicyArn,
    "attach (with the read policy) to operators who repair: agentbus dlq redrive, republish, replay, reply approve | reject, send resolve",
  );
  const tables = {
    State: stack.tables.state,
    Events: stack.tables.events,
    Inbox: stack.tables.inbox,
    SideEffects: stack.tables.sideEffects,
    // The customers' wrapped data keys (agentbus erase deletes from it).
    CustomerKeys: stack.customerKeys.table,
  };
  for (const [name, table] of Object.entries(tables)) {
    output(`${name}TableName`, table.tableName, `DynamoDB table ${name}`);
  }
  output("CustomerKeysKeyArn", stack.customerKeys.key.keyArn, "KMS key wrapping customers' keys");
  if (stack.frontDoor) frontDoorOutputs(stack.frontDoor, output);
}

/** The front door's URLs, and its A2A push queues where it offers agents. */
function frontDoorOutputs(frontDoor: FrontDoor, output: OutputFn): void {
  output("FrontDoorUrl", frontDoor.url, "the HTTP API's base URL (clients send a JWT)");
  // A function URL ends with "/".
  output(
    "FrontDoorStreamUrl",
    `${frontDoor.streamUrl.url}v1`,
    "the streams' base URL (server-sent events; clients send a JWT)",
  );
  const push = frontDoor.a2aPush;
  if (!push) return;
  output("A2aPushQueueUrl", push.queue.queueUrl, "a2a-push: the queue the relay feeds");
  output(
    "A2aPushDeadLetterQueueUrl",
    push.deadLetterQueue.queueUrl,
    "a2a-push: messages of runs whose tasks' states could not be read",
  );
}
