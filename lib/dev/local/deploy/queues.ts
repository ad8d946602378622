import {
  CreateQueueCommand,
  type CreateQueueCommandInput,
  GetQueueAttributesCommand,
} from "@aws-sdk/client-sqs";
import type { Physical } from "../template";
import type { Deployer, Placement, ResourceInput } from "./model";
import { arnOf, generatedName } from "./naming";

/**
 * Queue properties the emulator takes as queue attributes unchanged. moto 5.2 keeps a FIFO
 * queue's high-throughput settings (DeduplicationScope, FifoThroughputLimit) and reports them,
 * but de-duplicates per queue whatever the scope: stricter, and the same for AgentBus, whose
 * dedup ids never repeat across message groups.
 */
const PLAIN_ATTRIBUTES = [
  "VisibilityTimeout",
  "MessageRetentionPeriod",
  "DelaySeconds",
  "ReceiveMessageWaitTimeSeconds",
  "MaximumMessageSize",
  "DeduplicationScope",
  "FifoThroughputLimit",
] as const;

/**
 * `AWS::SQS::Queue` as a CreateQueue request. A FIFO queue without a name gets one ending in
 * `.fifo`, as CloudFormation does.
 */
export function createQueueRequest(
  { logicalId, props }: ResourceInput,
  placement: Placement,
): CreateQueueCommandInput & { QueueName: string } {
  const fifo = props.FifoQueue === true || props.FifoQueue === "true";
  const name =
    (props.QueueName as string | undefined) ??
    generatedName(placement, logicalId, 80, fifo ? ".fifo" : "");
  const attributes: Record<string, string> = {};
  for (const key of PLAIN_ATTRIBUTES) {
    if (props[key] !== undefined) attributes[key] = String(props[key]);
  }
  if (fifo) attributes.FifoQueue = "true";
  if (props.ContentBasedDeduplication !== undefined)
    attributes.ContentBasedDeduplication = String(props.ContentBasedDeduplication);
  if (props.RedrivePolicy) attributes.RedrivePolicy = JSON.stringify(props.RedrivePolicy);
  return { QueueName: name, Attributes: attributes };
}

/** Ref is the queue URL; GetAtt has Arn, QueueName and QueueUrl. */
export function queuePhysical(name: string, url: string, arn: string): Physical {
  return { ref: url, attributes: { Arn: arn, QueueName: name, QueueUrl: url } };
}

export const deployQueue: Deployer = async (input, ctx) => {
  const { sqs } = ctx.clients;
  const request = createQueueRequest(input, ctx);
  const created = await sqs.send(new CreateQueueCommand(request));
  const url = created.QueueUrl ?? "";
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }),
  );
  const arn = Attributes?.QueueArn ?? arnOf(ctx, "sqs", request.QueueName);
  return { physical: queuePhysical(request.QueueName, url, arn) };
};
