import { CreateTopicCommand, type CreateTopicCommandInput } from "@aws-sdk/client-sns";
import type { Physical } from "../template";
import type { Deployer, Placement, ResourceInput } from "./model";
import { arnOf, generatedName } from "./naming";

/** `AWS::SNS::Topic` as a CreateTopic request. */
export function createTopicRequest(
  { logicalId, props }: ResourceInput,
  placement: Placement,
): CreateTopicCommandInput & { Name: string } {
  const name = (props.TopicName as string | undefined) ?? generatedName(placement, logicalId, 256);
  const attributes: Record<string, string> = {};
  if (props.FifoTopic) attributes.FifoTopic = "true";
  if (props.ContentBasedDeduplication !== undefined)
    attributes.ContentBasedDeduplication = String(props.ContentBasedDeduplication);
  return { Name: name, Attributes: attributes };
}

/** Ref is the topic ARN; GetAtt has TopicArn and TopicName. */
export function topicPhysical(name: string, arn: string): Physical {
  return { ref: arn, attributes: { TopicArn: arn, TopicName: name } };
}

export const deployTopic: Deployer = async (input, ctx) => {
  const { sns } = ctx.clients;
  if (!sns) throw new Error(`topic ${input.logicalId} needs an SNS client`);
  const request = createTopicRequest(input, ctx);
  const created = await sns.send(new CreateTopicCommand(request));
  const arn = created.TopicArn ?? arnOf(ctx, "sns", request.Name);
  return { physical: topicPhysical(request.Name, arn) };
};
