import { CfnOutput, type Duration, type RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import type { Construct } from "constructs";
import { ConsumerGroup } from "./constructs/consumer-group";
import { Dashboard } from "./constructs/dashboard";
import { Relay } from "./constructs/relay";
import { AgentBusTables } from "./constructs/tables";
import { Topic, type TopicName } from "./constructs/topic";
import { topology as projectTopology, type Topology } from "./topology";

export interface AgentBusStackProps extends StackProps {
  /**
   * Deployment stage, part of the bus and queue names (`agentbus-<stage>-...`).
   * @default "dev"
   */
  readonly stage?: string;

  /**
   * Topics and consumer groups to deploy.
   * @default - the project's topology (`lib/topology.ts`)
   */
  readonly topology?: Topology;

  /**
   * What happens to the tables (the only stateful resources) when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly tablesRemovalPolicy?: RemovalPolicy;

  /**
   * How long each topic's archive keeps events for replay.
   * @default Duration.days(30)
   */
  readonly archiveRetention?: Duration;
}

/**
 * AgentBus: the tables (stateful, in their own construct), and from the topology one topic per
 * declared topic, the outbox relay, one consumer group per declared group, and a dashboard.
 */
export class AgentBusStack extends Stack {
  readonly tables: AgentBusTables;
  readonly topics: ReadonlyMap<TopicName, Topic>;
  readonly relay: Relay;
  readonly groups: readonly ConsumerGroup[];
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: AgentBusStackProps = {}) {
    super(scope, id, props);
    const stage = props.stage ?? "dev";
    const topology = props.topology ?? projectTopology;

    this.tables = new AgentBusTables(this, "Tables", { removalPolicy: props.tablesRemovalPolicy });

    this.topics = new Map(
      topology.topics.map((topicName) => [
        topicName,
        new Topic(this, `${pascal(topicName)}Topic`, {
          topicName,
          stage,
          archiveRetention: props.archiveRetention,
        }),
      ]),
    );
    this.relay = new Relay(this, "Relay", {
      topics: [...this.topics.values()],
      tables: this.tables,
    });

    this.groups = topology.groups.map(
      (group) =>
        new ConsumerGroup(this, pascal(group.name), {
          groupName: group.name,
          stage,
          subscriptions: group.subscriptions.map(({ topic, eventTypes }) => ({
            topic: this.topic(topic),
            eventTypes,
          })),
          entry: group.handler,
          tables: this.tables,
          ordering: group.ordering,
          delivery: group.delivery,
          orderKey: group.orderKey,
          batchSize: group.batchSize,
          maxConcurrency: group.maxConcurrency,
          maxReceiveCount: group.maxReceiveCount,
          functionTimeout: group.functionTimeout,
          visibilityTimeout: group.visibilityTimeout,
        }),
    );

    this.dashboard = new Dashboard(this, "Dashboard", {
      stage,
      groups: this.groups,
      relay: this.relay,
    });
    this.outputs();
  }

  /** The deployed topic of that name. */
  topic(name: TopicName): Topic {
    const topic = this.topics.get(name);
    if (!topic) throw new Error(`topic ${JSON.stringify(name)} is not declared in the topology`);
    return topic;
  }

  private outputs(): void {
    for (const topic of this.topics.values()) {
      new CfnOutput(this, `${pascal(topic.topicName)}BusName`, { value: topic.busName });
    }
    for (const group of this.groups) {
      const id = group.node.id;
      new CfnOutput(this, `${id}QueueUrl`, { value: group.queue.queueUrl });
      new CfnOutput(this, `${id}DeadLetterQueueUrl`, { value: group.deadLetterQueue.queueUrl });
      if (group.bufferDeadLetterQueue) {
        new CfnOutput(this, `${id}BufferDeadLetterQueueUrl`, {
          value: group.bufferDeadLetterQueue.queueUrl,
        });
      }
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

function pascal(kebab: string): string {
  return kebab
    .split("-")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}
