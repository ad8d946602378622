import type { Deployer, LocalPipe, ResourceInput } from "./model";
import { arnOf } from "./naming";

interface PipeTargetParameters {
  InputTemplate?: string;
  SqsQueueParameters?: { MessageGroupId?: string; MessageDeduplicationId?: string };
}

/** `AWS::Pipes::Pipe` as the runtime runs it: SQS to SQS only, BatchSize 10 by default. */
export function pipeOf({ logicalId, props }: ResourceInput): LocalPipe {
  const source = String(props.Source);
  const target = String(props.Target);
  if (!source.includes(":sqs:") || !target.includes(":sqs:")) {
    throw new Error(
      `pipe ${logicalId}: the local runtime runs SQS -> SQS pipes only (${source} -> ${target})`,
    );
  }
  const sourceParams = props.SourceParameters as
    | { SqsQueueParameters?: { BatchSize?: number } }
    | undefined;
  const targetParams = props.TargetParameters as PipeTargetParameters | undefined;
  return {
    logicalId,
    sourceArn: source,
    targetArn: target,
    batchSize: Number(sourceParams?.SqsQueueParameters?.BatchSize ?? 10),
    messageGroupId: targetParams?.SqsQueueParameters?.MessageGroupId,
    messageDeduplicationId: targetParams?.SqsQueueParameters?.MessageDeduplicationId,
    inputTemplate: targetParams?.InputTemplate,
  };
}

/** The emulator has no Pipes: the runtime moves the messages itself. */
export const deployPipe: Deployer = async (input, ctx) => ({
  physical: {
    ref: input.logicalId,
    attributes: { Arn: arnOf(ctx, "pipes", `pipe/${input.logicalId}`) },
  },
  local: { kind: "pipe", value: pipeOf(input) },
});
