import { GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { LocalDeployment } from "../deploy";

/** The URL of the deployed queue with this ARN. */
export function queueUrlOf(deployment: LocalDeployment, arn: string): string {
  for (const r of deployment.resources.values())
    if (r.attributes.Arn === arn && r.type === "AWS::SQS::Queue") return r.ref;
  throw new Error(`no queue deployed with ARN ${arn}`);
}

/** The queues the stack's SQS event source mappings, pipes and bridges to new buses read. */
export function mappedQueueUrls(deployment: LocalDeployment): string[] {
  const arns = [
    ...deployment.mappings.filter((m) => m.source === "sqs").map((m) => m.eventSourceArn),
    ...deployment.pipes.map((p) => p.sourceArn),
  ];
  const bridges = (deployment.bridges ?? []).map((b) => b.queueUrl);
  return [...new Set(arns)].map((arn) => queueUrlOf(deployment, arn)).concat(bridges);
}

/** Whether no queue holds a message: visible, in flight or delayed. */
export async function queuesEmpty(sqs: SQSClient, urls: readonly string[]): Promise<boolean> {
  for (const url of urls) {
    const { Attributes = {} } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          "ApproximateNumberOfMessages",
          "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed",
        ],
      }),
    );
    const total =
      Number(Attributes.ApproximateNumberOfMessages ?? 0) +
      Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(Attributes.ApproximateNumberOfMessagesDelayed ?? 0);
    if (total > 0) return false;
  }
  return true;
}
