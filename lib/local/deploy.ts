import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DynamoDBClient,
  UpdateTimeToLiveCommand,
} from "@aws-sdk/client-dynamodb";
import {
  CreateEventBusCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import { CreateTopicCommand, SNSClient } from "@aws-sdk/client-sns";
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import {
  deploymentOrder,
  type Physical,
  resolve,
  type Template,
  type TemplateResource,
} from "./template";

export interface AwsClients {
  readonly dynamodb: DynamoDBClient;
  readonly sqs: SQSClient;
  readonly eventbridge: EventBridgeClient;
  /** For stacks with SNS topics (the reply channel). */
  readonly sns?: SNSClient;
}

export interface LocalFunction {
  readonly logicalId: string;
  readonly name: string;
  /** Repo-relative handler module (CloudFormation metadata `agentbus:entry`). */
  readonly entry: string;
  readonly kind: string;
  readonly group?: string;
  readonly environment: Record<string, string>;
  readonly timeoutSeconds: number;
}

export interface LocalMapping {
  readonly logicalId: string;
  readonly functionLogicalId: string;
  readonly eventSourceArn: string;
  readonly source: "sqs" | "dynamodb-stream";
  readonly batchSize: number;
  readonly reportBatchItemFailures: boolean;
  readonly maximumConcurrency?: number;
  readonly bisectBatchOnFunctionError: boolean;
  readonly maximumRetryAttempts?: number;
  readonly startingPosition?: string;
  /** Event filter patterns (JSON objects). */
  readonly filters: unknown[];
  readonly onFailureArn?: string;
}

/** An EventBridge Pipe from an SQS queue to an SQS queue, run by the local runtime. */
export interface LocalPipe {
  readonly logicalId: string;
  readonly sourceArn: string;
  readonly targetArn: string;
  readonly batchSize: number;
  /** JSON paths (`$.body.detail.order_key`) or literals for the FIFO target's group and dedup ids. */
  readonly messageGroupId?: string;
  readonly messageDeduplicationId?: string;
  /** Pipes input template (`<$.body.detail>`); absent = the source message as the pipe sees it. */
  readonly inputTemplate?: string;
}

/**
 * An EventBridge schedule rule (`ScheduleExpression`) whose targets are functions of the stack:
 * not created in the emulator (it cannot invoke Lambda); the local runtime invokes the targets on
 * its own interval instead.
 */
export interface LocalSchedule {
  readonly logicalId: string;
  readonly expression: string;
  /** The rate in seconds (`rate(n minute|minutes|hour|hours|day|days)`), if it is a rate. */
  readonly rateSeconds?: number;
  readonly functionLogicalIds: readonly string[];
}

export interface LocalDeployment {
  readonly stackName: string;
  readonly region: string;
  readonly accountId: string;
  readonly resources: ReadonlyMap<string, Physical & { type: string }>;
  readonly functions: readonly LocalFunction[];
  readonly mappings: readonly LocalMapping[];
  readonly pipes: readonly LocalPipe[];
  readonly schedules: readonly LocalSchedule[];
  /** Resource types the emulator does not need (IAM, logs, alarms, ...) and how many of each. */
  readonly skipped: Readonly<Record<string, number>>;
  readonly outputs: Readonly<Record<string, string>>;
}

/** What the local deployer creates; everything else in the template is listed as skipped. */
export const DEPLOYED_TYPES = [
  "AWS::DynamoDB::Table",
  "AWS::SQS::Queue",
  "AWS::Events::EventBus",
  "AWS::SNS::Topic",
  "AWS::Events::Rule",
  "AWS::Lambda::Function",
  "AWS::Lambda::EventSourceMapping",
  "AWS::Pipes::Pipe",
] as const;

/**
 * Deploy the infrastructure part of a synthesized template to an emulator: tables, queues,
 * buses and rules are created through the service APIs; Lambda functions and their event source
 * mappings, and schedule rules (which only invoke functions), are recorded so the local runtime
 * can run the same handlers in-process.
 */
export async function deployTemplate(
  template: Template,
  clients: AwsClients,
  options: { stackName: string; region: string; accountId?: string },
): Promise<LocalDeployment> {
  const accountId = options.accountId ?? "123456789012";
  const physical = new Map<string, Physical & { type: string }>();
  const functions: LocalFunction[] = [];
  const mappings: LocalMapping[] = [];
  const pipes: LocalPipe[] = [];
  const schedules: LocalSchedule[] = [];
  const skipped: Record<string, number> = {};
  const deployed = new Set<string>(DEPLOYED_TYPES);
  for (const r of Object.values(template.Resources)) {
    if (!deployed.has(r.Type)) skipped[r.Type] = (skipped[r.Type] ?? 0) + 1;
  }
  const ctx = { region: options.region, accountId, stackName: options.stackName, physical };
  const nameFor = (logicalId: string, max: number, suffix = "") =>
    `${options.stackName}-${logicalId}`.slice(0, max - suffix.length) + suffix;

  for (const logicalId of deploymentOrder(template, (t) => deployed.has(t))) {
    const resource = template.Resources[logicalId] as TemplateResource;
    // Resolve only what the emulator needs: other properties may refer to resources it skips.
    const raw = resource.Properties ?? {};
    const props = new Proxy({} as Record<string, unknown>, {
      get: (_t, key: string) => resolve(raw[key], ctx),
    });
    const arnOf = (service: string, rest: string) =>
      `arn:aws:${service}:${options.region}:${accountId}:${rest}`;
    switch (resource.Type) {
      case "AWS::DynamoDB::Table": {
        const name = (props.TableName as string | undefined) ?? nameFor(logicalId, 255);
        const input = {
          TableName: name,
          KeySchema: props.KeySchema,
          AttributeDefinitions: props.AttributeDefinitions,
          BillingMode: (props.BillingMode as string | undefined) ?? "PAY_PER_REQUEST",
          GlobalSecondaryIndexes: props.GlobalSecondaryIndexes,
          StreamSpecification: props.StreamSpecification
            ? {
                StreamEnabled: true,
                StreamViewType: (props.StreamSpecification as { StreamViewType: string })
                  .StreamViewType,
              }
            : undefined,
        } as CreateTableCommandInput;
        const created = await clients.dynamodb.send(new CreateTableCommand(input));
        const ttl = props.TimeToLiveSpecification as
          | { AttributeName?: string; Enabled?: boolean }
          | undefined;
        if (ttl?.Enabled && ttl.AttributeName) {
          await clients.dynamodb.send(
            new UpdateTimeToLiveCommand({
              TableName: name,
              TimeToLiveSpecification: { AttributeName: ttl.AttributeName, Enabled: true },
            }),
          );
        }
        const described = await clients.dynamodb.send(
          new DescribeTableCommand({ TableName: name }),
        );
        physical.set(logicalId, {
          type: resource.Type,
          ref: name,
          attributes: {
            Arn: created.TableDescription?.TableArn ?? arnOf("dynamodb", `table/${name}`),
            ...(described.Table?.LatestStreamArn
              ? { StreamArn: described.Table.LatestStreamArn }
              : {}),
          },
        });
        break;
      }
      case "AWS::SQS::Queue": {
        const fifo = props.FifoQueue === true || props.FifoQueue === "true";
        const name =
          (props.QueueName as string | undefined) ?? nameFor(logicalId, 80, fifo ? ".fifo" : "");
        const attributes: Record<string, string> = {};
        for (const key of [
          "VisibilityTimeout",
          "MessageRetentionPeriod",
          "DelaySeconds",
          "ReceiveMessageWaitTimeSeconds",
          "MaximumMessageSize",
        ]) {
          if (props[key] !== undefined) attributes[key] = String(props[key]);
        }
        if (fifo) attributes.FifoQueue = "true";
        if (props.ContentBasedDeduplication !== undefined)
          attributes.ContentBasedDeduplication = String(props.ContentBasedDeduplication);
        if (props.RedrivePolicy) attributes.RedrivePolicy = JSON.stringify(props.RedrivePolicy);
        const created = await clients.sqs.send(
          new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
        );
        const url = created.QueueUrl ?? "";
        const arn = (
          await clients.sqs.send(
            new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }),
          )
        ).Attributes?.QueueArn;
        physical.set(logicalId, {
          type: resource.Type,
          ref: url,
          attributes: { Arn: arn ?? arnOf("sqs", name), QueueName: name, QueueUrl: url },
        });
        break;
      }
      case "AWS::SNS::Topic": {
        if (!clients.sns) throw new Error(`topic ${logicalId} needs an SNS client`);
        const name = (props.TopicName as string | undefined) ?? nameFor(logicalId, 256);
        const attributes: Record<string, string> = {};
        if (props.FifoTopic) attributes.FifoTopic = "true";
        if (props.ContentBasedDeduplication !== undefined)
          attributes.ContentBasedDeduplication = String(props.ContentBasedDeduplication);
        const created = await clients.sns.send(
          new CreateTopicCommand({ Name: name, Attributes: attributes }),
        );
        const arn = created.TopicArn ?? arnOf("sns", name);
        physical.set(logicalId, {
          type: resource.Type,
          ref: arn,
          attributes: { TopicArn: arn, TopicName: name },
        });
        break;
      }
      case "AWS::Events::EventBus": {
        const name = String(props.Name);
        const created = await clients.eventbridge.send(new CreateEventBusCommand({ Name: name }));
        const arn = created.EventBusArn ?? arnOf("events", `event-bus/${name}`);
        physical.set(logicalId, {
          type: resource.Type,
          ref: name,
          attributes: { Arn: arn, Name: name },
        });
        break;
      }
      case "AWS::Events::Rule": {
        if (raw.ScheduleExpression !== undefined) {
          const expression = String(props.ScheduleExpression);
          const targets = (raw.Targets as { Arn?: unknown }[] | undefined) ?? [];
          const functionLogicalIds = targets.map((t) => {
            const att = (t.Arn as { "Fn::GetAtt"?: unknown[] } | undefined)?.["Fn::GetAtt"];
            const id = Array.isArray(att) ? att[0] : undefined;
            if (typeof id !== "string" || template.Resources[id]?.Type !== "AWS::Lambda::Function")
              throw new Error(
                `schedule rule ${logicalId}: the local runtime runs only function targets of the stack (Fn::GetAtt <function> Arn)`,
              );
            return id;
          });
          schedules.push({
            logicalId,
            expression,
            rateSeconds: rateSeconds(expression),
            functionLogicalIds,
          });
          physical.set(logicalId, {
            type: resource.Type,
            ref: logicalId,
            attributes: { Arn: arnOf("events", `rule/${logicalId}`) },
          });
          break;
        }
        const name = (props.Name as string | undefined) ?? nameFor(logicalId, 64);
        const bus =
          String(props.EventBusName ?? "default")
            .split("/")
            .at(-1) ?? "default";
        const rule = await clients.eventbridge.send(
          new PutRuleCommand({
            Name: name,
            EventBusName: bus,
            EventPattern: JSON.stringify(props.EventPattern),
            State: (props.State as "ENABLED" | undefined) ?? "ENABLED",
          }),
        );
        const targets = (props.Targets as Record<string, unknown>[] | undefined) ?? [];
        if (targets.length > 0) {
          await clients.eventbridge.send(
            new PutTargetsCommand({
              Rule: name,
              EventBusName: bus,
              Targets: targets.map((t) => ({
                Id: String(t.Id),
                Arn: String(t.Arn),
                ...(t.SqsParameters ? { SqsParameters: t.SqsParameters } : {}),
                ...(t.DeadLetterConfig ? { DeadLetterConfig: t.DeadLetterConfig } : {}),
                ...(t.RetryPolicy ? { RetryPolicy: t.RetryPolicy } : {}),
                ...(t.Input ? { Input: String(t.Input) } : {}),
                ...(t.InputPath ? { InputPath: String(t.InputPath) } : {}),
              })),
            }),
          );
        }
        physical.set(logicalId, {
          type: resource.Type,
          ref: name,
          attributes: { Arn: rule.RuleArn ?? arnOf("events", `rule/${bus}/${name}`) },
        });
        break;
      }
      case "AWS::Lambda::Function": {
        const name = (props.FunctionName as string | undefined) ?? nameFor(logicalId, 64);
        const metadata = resource.Metadata ?? {};
        const entry = metadata["agentbus:entry"];
        if (typeof entry !== "string") {
          throw new Error(
            `function ${logicalId} has no agentbus:entry metadata: the local runtime cannot run it`,
          );
        }
        const variables = ((
          props.Environment as { Variables?: Record<string, unknown> } | undefined
        )?.Variables ?? {}) as Record<string, unknown>;
        functions.push({
          logicalId,
          name,
          entry,
          kind: String(metadata["agentbus:kind"] ?? "unknown"),
          group:
            typeof metadata["agentbus:group"] === "string"
              ? (metadata["agentbus:group"] as string)
              : undefined,
          environment: Object.fromEntries(
            Object.entries(variables).map(([k, v]) => [k, String(v)]),
          ),
          timeoutSeconds: Number(props.Timeout ?? 3),
        });
        physical.set(logicalId, {
          type: resource.Type,
          ref: name,
          attributes: { Arn: arnOf("lambda", `function:${name}`) },
        });
        break;
      }
      case "AWS::Pipes::Pipe": {
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
        const targetParams = props.TargetParameters as
          | {
              InputTemplate?: string;
              SqsQueueParameters?: { MessageGroupId?: string; MessageDeduplicationId?: string };
            }
          | undefined;
        pipes.push({
          logicalId,
          sourceArn: source,
          targetArn: target,
          batchSize: Number(sourceParams?.SqsQueueParameters?.BatchSize ?? 10),
          messageGroupId: targetParams?.SqsQueueParameters?.MessageGroupId,
          messageDeduplicationId: targetParams?.SqsQueueParameters?.MessageDeduplicationId,
          inputTemplate: targetParams?.InputTemplate,
        });
        physical.set(logicalId, {
          type: resource.Type,
          ref: logicalId,
          attributes: { Arn: arnOf("pipes", `pipe/${logicalId}`) },
        });
        break;
      }
      case "AWS::Lambda::EventSourceMapping": {
        const fnRef = raw.FunctionName as { Ref?: string } | undefined;
        if (!fnRef?.Ref)
          throw new Error(
            `event source mapping ${logicalId}: FunctionName must Ref a function of the stack`,
          );
        const arn = String(props.EventSourceArn);
        const filters = (
          (props.FilterCriteria as { Filters?: { Pattern: string }[] } | undefined)?.Filters ?? []
        ).map((f) => JSON.parse(f.Pattern));
        const destination = (
          props.DestinationConfig as { OnFailure?: { Destination?: string } } | undefined
        )?.OnFailure?.Destination;
        mappings.push({
          logicalId,
          functionLogicalId: fnRef.Ref,
          eventSourceArn: arn,
          source: arn.includes(":sqs:") ? "sqs" : "dynamodb-stream",
          batchSize: Number(props.BatchSize ?? (arn.includes(":sqs:") ? 10 : 100)),
          reportBatchItemFailures: (
            (props.FunctionResponseTypes as string[] | undefined) ?? []
          ).includes("ReportBatchItemFailures"),
          maximumConcurrency: (props.ScalingConfig as { MaximumConcurrency?: number } | undefined)
            ?.MaximumConcurrency,
          bisectBatchOnFunctionError: props.BisectBatchOnFunctionError === true,
          maximumRetryAttempts:
            props.MaximumRetryAttempts === undefined
              ? undefined
              : Number(props.MaximumRetryAttempts),
          startingPosition: props.StartingPosition as string | undefined,
          filters,
          onFailureArn: destination,
        });
        physical.set(logicalId, { type: resource.Type, ref: logicalId, attributes: {} });
        break;
      }
    }
  }
  const outputs: Record<string, string> = {};
  for (const [key, output] of Object.entries(template.Outputs ?? {})) {
    try {
      outputs[key] = String(resolve(output.Value, ctx));
    } catch {
      // an output about a resource the emulator does not hold
    }
  }
  return {
    stackName: options.stackName,
    region: options.region,
    accountId,
    resources: physical,
    functions,
    mappings,
    pipes,
    schedules,
    skipped,
    outputs,
  };
}

/** Seconds of an EventBridge `rate(...)` expression; undefined for cron or anything else. */
export function rateSeconds(expression: string): number | undefined {
  const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  if (!match) return undefined;
  const unit = { minute: 60, hour: 3600, day: 86_400 }[
    match[2]?.replace(/s$/, "") as "minute" | "hour" | "day"
  ];
  return Number(match[1]) * unit;
}

/** SDK clients pointed at an emulator endpoint with throwaway credentials. */
export function emulatorClients(endpoint: string, region = "us-east-1"): AwsClients {
  const config = {
    endpoint,
    region,
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  };
  return {
    dynamodb: new DynamoDBClient(config),
    sqs: new SQSClient(config),
    eventbridge: new EventBridgeClient(config),
    sns: new SNSClient(config),
  };
}
