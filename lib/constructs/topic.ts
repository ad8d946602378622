import { type CfnEventBus, EventBus, type IEventBus } from "aws-cdk-lib/aws-events";
import type { Grant, IGrantable } from "aws-cdk-lib/aws-iam";
import { Construct } from "constructs";
import { TOPICS, type Topic as TopicName } from "../../schemas";
import { assertKebabCase } from "./function";

export type { TopicName };

export interface TopicProps {
  /** Which topic of the registry (`commands`, `events` or `audit`) this bus carries. */
  readonly topicName: TopicName;

  /**
   * Deployment stage; part of the bus name `agentbus-<stage>-<topic>`.
   * @default "dev"
   */
  readonly stage?: string;
}

/**
 * One topic of AgentBus: an EventBridge bus named `agentbus-<stage>-<topic>` that the relay
 * publishes to and consumer groups subscribe to with rules.
 *
 * Later concerns of a topic (archive and replay, schema registry discovery, a resource policy for
 * other accounts) belong here, next to the bus.
 */
export class Topic extends Construct {
  readonly topicName: TopicName;
  readonly bus: IEventBus;
  /**
   * The bus name as `Fn::GetAtt Name`: rules and environment variables use this rather than the
   * bus's `Ref`, which moto's CloudFormation does not resolve to the name.
   */
  readonly busName: string;
  readonly busArn: string;

  constructor(scope: Construct, id: string, props: TopicProps) {
    super(scope, id);
    if (!(TOPICS as readonly string[]).includes(props.topicName)) {
      throw new Error(
        `topic ${JSON.stringify(props.topicName)} is not one of ${TOPICS.map((t) => JSON.stringify(t)).join(", ")}`,
      );
    }
    const stage = props.stage ?? "dev";
    assertKebabCase("stage", stage, 16);
    this.topicName = props.topicName;

    const bus = new EventBus(this, "Resource", {
      eventBusName: `agentbus-${stage}-${props.topicName}`,
      description: `AgentBus ${props.topicName} topic (${stage})`,
    });
    this.bus = bus;
    this.busName = (bus.node.defaultChild as CfnEventBus).attrName;
    this.busArn = bus.eventBusArn;
  }

  /** Allow `grantee` to publish to this topic (`events:PutEvents` on this bus only). */
  grantPutEvents(grantee: IGrantable): Grant {
    return this.bus.grantPutEventsTo(grantee);
  }
}
