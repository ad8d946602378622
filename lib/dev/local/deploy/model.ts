import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import type { KMSClient } from "@aws-sdk/client-kms";
import type { SNSClient } from "@aws-sdk/client-sns";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Physical, Template, TemplateResource } from "../template";

export interface AwsClients {
  readonly dynamodb: DynamoDBClient;
  readonly sqs: SQSClient;
  readonly eventbridge: EventBridgeClient;
  /** For stacks with KMS keys (the one that wraps the customers' data keys). */
  readonly kms?: KMSClient;
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
  /** `MemorySize` in MB (Lambda's default, 128, when the template has none). */
  readonly memoryMb: number;
  /** `Architectures[0]` (Lambda's default, x86_64, when the template has none). */
  readonly architecture: "arm64" | "x86_64";
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
  /**
   * How long a stream batch is gathered before the function is invoked (seconds; 0 or absent:
   * as soon as records are read). The runtime's SQS pollers take none.
   */
  readonly maximumBatchingWindowSeconds?: number;
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

/** A new EventBridge bus (`AWS::EventsV2::EventBus`), emulated by the local runtime. */
export interface LocalSubscriberBus {
  readonly logicalId: string;
  readonly name: string;
  readonly arn: string;
  /** How long the bus keeps its events (what a point-in-time subscriber can read). */
  readonly retentionDays: number;
  /** When the bus was created (epoch ms); absent: when the runtime started emulating it. */
  readonly createdAt?: number;
}

/** A subscriber of a new bus that sends to an SQS queue, emulated by the local runtime. */
export interface LocalSubscriber {
  readonly logicalId: string;
  readonly name: string;
  readonly busArn: string;
  /** `Type: FIFO`: delivered in order within each event group. */
  readonly fifo: boolean;
  /** The `DATA` filters' patterns: an event must match every one. */
  readonly patterns: readonly unknown[];
  readonly targetArn: string;
  /** JSONata (`{% $events.SystemMetadata.EventGroupId %}`) or literals, for a FIFO target. */
  readonly messageGroupId?: string;
  readonly messageDeduplicationId?: string;
  /** Where a record of an event it could not deliver goes (ids, no payload). */
  readonly onFailureArn?: string;
  readonly maxRetryAttempts: number;
  /** A `JSONATA` transformer's expression (a replay's); absent: `RAW`, the payload as it is. */
  readonly transformer?: string;
}

/** A classic rule forwarding to a new bus: it delivers to `queueUrl`, the runtime forwards. */
export interface LocalBridge {
  readonly logicalId: string;
  readonly queueUrl: string;
  readonly busArn: string;
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
  /** EventBridge's new buses and their subscribers, which no emulator has. */
  readonly subscriberBuses: readonly LocalSubscriberBus[];
  readonly subscribers: readonly LocalSubscriber[];
  /** Classic rules that forward to a new bus. */
  readonly bridges: readonly LocalBridge[];
  /** Resource types the emulator does not need (IAM, logs, alarms, ...) and how many of each. */
  readonly skipped: Readonly<Record<string, number>>;
  readonly outputs: Readonly<Record<string, string>>;
}

/** Where the stack is deployed: what its physical names and ARNs are made of. */
export interface Placement {
  readonly stackName: string;
  readonly region: string;
  readonly accountId: string;
}

/** One resource of the template as a deployer reads it. */
export interface ResourceInput {
  readonly logicalId: string;
  /** The resource as written in the template (intrinsics unresolved). */
  readonly resource: TemplateResource;
  /**
   * Its properties, each resolved when read: a deployer resolves only what the emulator needs
   * (other properties may refer to resources it skips).
   */
  readonly props: Readonly<Record<string, unknown>>;
  /** Resolves a part of a property (a property may hold parts that refer to skipped resources). */
  readonly resolve: (value: unknown) => unknown;
}

/** What the local runtime runs instead of the emulator: recorded, not created. */
export type LocalPart =
  | { readonly kind: "function"; readonly value: LocalFunction }
  | { readonly kind: "mapping"; readonly value: LocalMapping }
  | { readonly kind: "pipe"; readonly value: LocalPipe }
  | { readonly kind: "subscriber-bus"; readonly value: LocalSubscriberBus }
  | { readonly kind: "subscriber"; readonly value: LocalSubscriber }
  | { readonly kind: "bridge"; readonly value: LocalBridge }
  | { readonly kind: "schedule"; readonly value: LocalSchedule };

export interface Deployed {
  /** What `Ref` and `Fn::GetAtt` of the resource return from now on. */
  readonly physical: Physical;
  readonly local?: LocalPart;
}

export interface DeployContext extends Placement {
  readonly clients: AwsClients;
  readonly template: Template;
}

/** Creates one resource type in the emulator (or records it for the runtime). */
export type Deployer = (input: ResourceInput, ctx: DeployContext) => Promise<Deployed>;
