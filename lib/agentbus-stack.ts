import { CfnOutput, Stack, type StackProps } from "aws-cdk-lib";
import type { Construct } from "constructs";
import { taskProjection } from "../functions/roles/task-projection";
import { ConsumerGroup } from "./constructs/consumer-group";
import { Relay } from "./constructs/relay";
import { AgentBusTables } from "./constructs/tables";
import { Topic, type TopicName } from "./constructs/topic";

/** The topics this stack deploys; add "commands" or "audit" here when a group subscribes to them. */
const TOPICS_IN_USE = ["events"] as const satisfies readonly TopicName[];

export interface AgentBusStackProps extends StackProps {
  /**
   * Deployment stage, part of the bus and queue names (`agentbus-<stage>-...`).
   * @default "dev"
   */
  readonly stage?: string;
}

/** AgentBus: topics, tables, the outbox relay and the consumer groups. */
export class AgentBusStack extends Stack {
  readonly tables: AgentBusTables;
  readonly topics: ReadonlyMap<TopicName, Topic>;
  readonly relay: Relay;
  readonly groups: readonly ConsumerGroup[];

  constructor(scope: Construct, id: string, props: AgentBusStackProps = {}) {
    super(scope, id, props);
    const stage = props.stage ?? "dev";

    this.tables = new AgentBusTables(this, "Tables");
    this.topics = new Map(
      TOPICS_IN_USE.map((topicName) => [
        topicName,
        new Topic(this, `${capitalize(topicName)}Topic`, { topicName, stage }),
      ]),
    );
    this.relay = new Relay(this, "Relay", {
      topics: [...this.topics.values()],
      tables: this.tables,
    });

    this.groups = [
      new ConsumerGroup(this, "TaskProjection", {
        groupName: taskProjection.group,
        stage,
        subscriptions: [{ topic: this.topic("events"), eventTypes: taskProjection.subscriptions }],
        entry: "functions/handlers/task-projection.ts",
        tables: this.tables,
      }),
    ];

    this.outputs();
  }

  /** The deployed topic of that name. */
  topic(name: TopicName): Topic {
    const topic = this.topics.get(name);
    if (!topic)
      throw new Error(`topic ${JSON.stringify(name)} is not deployed (add it to TOPICS_IN_USE)`);
    return topic;
  }

  private outputs(): void {
    for (const topic of this.topics.values()) {
      new CfnOutput(this, `${capitalize(topic.topicName)}BusName`, { value: topic.busName });
    }
    for (const group of this.groups) {
      const id = group.node.id;
      new CfnOutput(this, `${id}QueueUrl`, { value: group.queue.queueUrl });
      new CfnOutput(this, `${id}DeadLetterQueueUrl`, { value: group.deadLetterQueue.queueUrl });
      new CfnOutput(this, `${id}BufferDeadLetterQueueUrl`, {
        value: group.bufferDeadLetterQueue.queueUrl,
      });
    }
    new CfnOutput(this, "RelayFailureQueueUrl", { value: this.relay.failureQueue.queueUrl });
    const tables = {
      State: this.tables.state,
      Events: this.tables.events,
      Inbox: this.tables.inbox,
      SideEffects: this.tables.sideEffects,
    };
    for (const [name, table] of Object.entries(tables)) {
      new CfnOutput(this, `${name}TableName`, { value: table.tableName });
    }
  }
}

function capitalize(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}
