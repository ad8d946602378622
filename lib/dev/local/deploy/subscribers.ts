import type { Deployer, LocalSubscriber, LocalSubscriberBus, ResourceInput } from "./model";
import { arnOf } from "./naming";

/**
 * EventBridge's new buses (`AWS::EventsV2::EventBus`) and their subscribers
 * (`AWS::EventsV2::Subscriber`): no emulator has them, so they are recorded, not created, and the
 * local runtime emulates them (runtime/subscriber-buses.ts).
 */

/** A bus ARN ends in a service-generated id after the name (eventbridge-event-bus SKILL.md, 1). */
const LOCAL_BUS_ID = "local0000000000000000000000";

export function subscriberBusOf(
  { logicalId, props }: ResourceInput,
  arn: string,
): LocalSubscriberBus {
  const storage = props.StorageConfiguration as { RetentionPeriodInDays?: number } | undefined;
  return {
    logicalId,
    name: String(props.Name),
    arn,
    retentionDays: Number(storage?.RetentionPeriodInDays ?? 1),
  };
}

export const deploySubscriberBus: Deployer = async (input, ctx) => {
  const arn = arnOf(ctx, "events", `event-busv2/${String(input.props.Name)}/${LOCAL_BUS_ID}`);
  return {
    physical: { ref: arn, attributes: { EventBusArn: arn } },
    local: { kind: "subscriber-bus", value: subscriberBusOf(input, arn) },
  };
};

interface InvokeConfiguration {
  TargetArn: string;
  SqsParameters?: { MessageGroupId?: string; MessageDeduplicationId?: string };
}

/**
 * `AWS::EventsV2::Subscriber` as the runtime runs it: an SQS target only, the default `RAW`
 * transformer (no `Transformer`), its `DATA` filters (the only scope the stack writes).
 */
export function subscriberOf({
  logicalId,
  props,
  resource,
  resolve,
}: ResourceInput): LocalSubscriber {
  // Read part by part: the role (IAM, not deployed locally) cannot be resolved.
  const raw = resource.Properties?.InvokeConfiguration as InvokeConfiguration;
  const invoke = {
    TargetArn: resolve(raw.TargetArn),
    SqsParameters: resolve(raw.SqsParameters),
  } as InvokeConfiguration;
  const target = String(invoke.TargetArn);
  if (!target.includes(":sqs:") || props.Transformer !== undefined)
    throw new Error(
      `subscriber ${logicalId}: the local runtime runs subscribers to SQS with the RAW transformer only (${target})`,
    );
  const filters = ((props.FilterConfiguration as { Filters?: { Scope: string; Pattern: string }[] })
    ?.Filters ?? []) as { Scope: string; Pattern: string }[];
  const unsupported = filters.find((f) => f.Scope !== "DATA");
  if (unsupported)
    throw new Error(
      `subscriber ${logicalId}: the local runtime filters DATA only, not ${unsupported.Scope}`,
    );
  const retry = props.RetryPolicy as { MaxRetryAttempts?: number } | undefined;
  return {
    logicalId,
    name: String(props.Name),
    busArn: String(props.EventBusArn),
    fifo: props.Type === "FIFO",
    patterns: filters.map((f) => JSON.parse(f.Pattern) as unknown),
    targetArn: target,
    messageGroupId: invoke.SqsParameters?.MessageGroupId,
    messageDeduplicationId: invoke.SqsParameters?.MessageDeduplicationId,
    onFailureArn: (props.OnFailureConfiguration as { Arn?: string } | undefined)?.Arn,
    // The service's default (eventbridge-event-bus SKILL.md, 12); the local runtime caps it.
    maxRetryAttempts: Number(retry?.MaxRetryAttempts ?? 5),
  };
}

/**
 * A subscriber's ARN, as the local deployment makes it: its bus's, with `subscriber/<name>` in
 * place of `event-busv2/<bus name>` (the local eventbridgev2 endpoint names them the same way).
 */
export function subscriberArnOf(busArn: string, name: string): string {
  return busArn.replace(/:event-busv2\/[^/]+\//, `:subscriber/${name}/`);
}

export const deploySubscriber: Deployer = async (input) => {
  const arn = subscriberArnOf(String(input.props.EventBusArn), String(input.props.Name));
  return {
    physical: { ref: arn, attributes: { SubscriberArn: arn } },
    local: { kind: "subscriber", value: subscriberOf(input) },
  };
};
