import type { Deployer, LocalMapping, ResourceInput } from "./model";

/**
 * `AWS::Lambda::EventSourceMapping` as the runtime runs it. The function must be a `Ref` to a
 * function of the stack, read from the template as written; BatchSize defaults as on AWS (10 for
 * SQS, 100 for a DynamoDB stream).
 */
export function mappingOf({ logicalId, resource, props }: ResourceInput): LocalMapping {
  const fnRef = resource.Properties?.FunctionName as { Ref?: string } | undefined;
  if (!fnRef?.Ref)
    throw new Error(
      `event source mapping ${logicalId}: FunctionName must Ref a function of the stack`,
    );
  const arn = String(props.EventSourceArn);
  const sqs = arn.includes(":sqs:");
  const filters = (
    (props.FilterCriteria as { Filters?: { Pattern: string }[] } | undefined)?.Filters ?? []
  ).map((f) => JSON.parse(f.Pattern));
  const destination = (
    props.DestinationConfig as { OnFailure?: { Destination?: string } } | undefined
  )?.OnFailure?.Destination;
  return {
    logicalId,
    functionLogicalId: fnRef.Ref,
    eventSourceArn: arn,
    source: sqs ? "sqs" : "dynamodb-stream",
    batchSize: Number(props.BatchSize ?? (sqs ? 10 : 100)),
    reportBatchItemFailures: ((props.FunctionResponseTypes as string[] | undefined) ?? []).includes(
      "ReportBatchItemFailures",
    ),
    maximumConcurrency: (props.ScalingConfig as { MaximumConcurrency?: number } | undefined)
      ?.MaximumConcurrency,
    bisectBatchOnFunctionError: props.BisectBatchOnFunctionError === true,
    maximumRetryAttempts:
      props.MaximumRetryAttempts === undefined ? undefined : Number(props.MaximumRetryAttempts),
    startingPosition: props.StartingPosition as string | undefined,
    ...(props.MaximumBatchingWindowInSeconds === undefined
      ? {}
      : { maximumBatchingWindowSeconds: Number(props.MaximumBatchingWindowInSeconds) }),
    filters,
    onFailureArn: destination,
  };
}

/** Never deployed to the emulator (its mappings cause phantom receives): run by the runtime. */
export const deployMapping: Deployer = async (input) => ({
  physical: { ref: input.logicalId, attributes: {} },
  local: { kind: "mapping", value: mappingOf(input) },
});
