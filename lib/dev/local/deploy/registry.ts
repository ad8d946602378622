import { deployArchive } from "./archives";
import { deployEventBus } from "./buses";
import { deployFunction } from "./functions";
import { deployKey } from "./keys";
import { deployMapping } from "./mappings";
import type { Deployer } from "./model";
import { deployPipe } from "./pipes";
import { deployQueue } from "./queues";
import { deployRule } from "./rules";
import { deploySubscriber, deploySubscriberBus } from "./subscribers";
import { deployTable } from "./tables";
import { deployTopic } from "./topics";

/** The deployer of each resource type the local stack needs; every other type is skipped. */
export const DEPLOYERS = {
  "AWS::DynamoDB::Table": deployTable,
  "AWS::SQS::Queue": deployQueue,
  "AWS::Events::EventBus": deployEventBus,
  "AWS::Events::Archive": deployArchive,
  "AWS::SNS::Topic": deployTopic,
  "AWS::Events::Rule": deployRule,
  "AWS::Lambda::Function": deployFunction,
  "AWS::Lambda::EventSourceMapping": deployMapping,
  "AWS::Pipes::Pipe": deployPipe,
  "AWS::EventsV2::EventBus": deploySubscriberBus,
  "AWS::EventsV2::Subscriber": deploySubscriber,
  "AWS::KMS::Key": deployKey,
} as const satisfies Readonly<Record<string, Deployer>>;

export type DeployedType = keyof typeof DEPLOYERS;

/** What the local deployer creates; everything else in the template is listed as skipped. */
export const DEPLOYED_TYPES = Object.keys(DEPLOYERS) as readonly DeployedType[];

export function deployerOf(type: string): Deployer | undefined {
  return Object.hasOwn(DEPLOYERS, type) ? DEPLOYERS[type as DeployedType] : undefined;
}
