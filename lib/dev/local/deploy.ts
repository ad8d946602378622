import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { KMSClient } from "@aws-sdk/client-kms";
import { SNSClient } from "@aws-sdk/client-sns";
import { SQSClient } from "@aws-sdk/client-sqs";
import type {
  AwsClients,
  DeployContext,
  LocalBridge,
  LocalDeployment,
  LocalFunction,
  LocalMapping,
  LocalPart,
  LocalPipe,
  LocalSchedule,
  LocalSubscriber,
  LocalSubscriberBus,
  ResourceInput,
} from "./deploy/model";
import { stackOutputs } from "./deploy/outputs";
import { deployerOf } from "./deploy/registry";
import {
  deploymentOrder,
  type Physical,
  type ResolveContext,
  resolve,
  type Template,
  type TemplateResource,
} from "./template";

export type {
  AwsClients,
  LocalBridge,
  LocalDeployment,
  LocalFunction,
  LocalMapping,
  LocalPipe,
  LocalSchedule,
  LocalSubscriber,
  LocalSubscriberBus,
} from "./deploy/model";
export { DEPLOYED_TYPES } from "./deploy/registry";
export { rateSeconds } from "./deploy/schedules";

/**
 * Deploy the infrastructure part of a synthesized template to an emulator: tables, queues,
 * buses and rules are created through the service APIs; Lambda functions and their event source
 * mappings, and schedule rules (which only invoke functions), are recorded so the local runtime
 * can run the same handlers in-process. Each resource type has its deployer
 * (`deploy/registry.ts`), resources are deployed after the ones they refer to.
 */
export async function deployTemplate(
  template: Template,
  clients: AwsClients,
  options: { stackName: string; region: string; accountId?: string },
): Promise<LocalDeployment> {
  const accountId = options.accountId ?? "123456789012";
  const ctx: DeployContext = { ...options, accountId, clients, template };
  const physical = new Map<string, Physical & { type: string }>();
  const resolving: ResolveContext = { ...options, accountId, physical };
  const local = new LocalParts();
  for (const logicalId of deploymentOrder(template, (t) => deployerOf(t) !== undefined)) {
    const resource = template.Resources[logicalId] as TemplateResource;
    const deploy = deployerOf(resource.Type);
    if (!deploy) continue;
    const deployed = await deploy(resourceInput(logicalId, resource, resolving), ctx);
    physical.set(logicalId, { type: resource.Type, ...deployed.physical });
    if (deployed.local) local.add(deployed.local);
  }
  return {
    stackName: options.stackName,
    region: options.region,
    accountId,
    resources: physical,
    functions: local.functions,
    mappings: local.mappings,
    pipes: local.pipes,
    schedules: local.schedules,
    subscriberBuses: local.subscriberBuses,
    subscribers: local.subscribers,
    bridges: local.bridges,
    skipped: skippedTypes(template),
    outputs: stackOutputs(template, resolving),
  };
}

/** A resource as its deployer reads it: properties resolved against what is deployed so far. */
export function resourceInput(
  logicalId: string,
  resource: TemplateResource,
  ctx: ResolveContext,
): ResourceInput {
  const raw = resource.Properties ?? {};
  const props = new Proxy({} as Record<string, unknown>, {
    get: (_t, key: string) => resolve(raw[key], ctx),
  });
  return { logicalId, resource, props, resolve: (value) => resolve(value, ctx) };
}

/** Resource types no deployer handles, and how many of each the template has. */
export function skippedTypes(template: Template): Record<string, number> {
  const skipped: Record<string, number> = {};
  for (const r of Object.values(template.Resources)) {
    if (!deployerOf(r.Type)) skipped[r.Type] = (skipped[r.Type] ?? 0) + 1;
  }
  return skipped;
}

/** What the runtime runs, in template deployment order. */
class LocalParts {
  readonly functions: LocalFunction[] = [];
  readonly mappings: LocalMapping[] = [];
  readonly pipes: LocalPipe[] = [];
  readonly schedules: LocalSchedule[] = [];
  readonly subscriberBuses: LocalSubscriberBus[] = [];
  readonly subscribers: LocalSubscriber[] = [];
  readonly bridges: LocalBridge[] = [];

  add(part: LocalPart): void {
    switch (part.kind) {
      case "function":
        this.functions.push(part.value);
        break;
      case "mapping":
        this.mappings.push(part.value);
        break;
      case "pipe":
        this.pipes.push(part.value);
        break;
      case "schedule":
        this.schedules.push(part.value);
        break;
      case "subscriber-bus":
        this.subscriberBuses.push(part.value);
        break;
      case "subscriber":
        this.subscribers.push(part.value);
        break;
      case "bridge":
        this.bridges.push(part.value);
        break;
    }
  }
}

/** SDK clients pointed at an emulator endpoint with throwaway credentials. */
/** How a client reaches the emulator: its endpoint, any credentials. */
export function emulatorConfig(endpoint: string, region = "us-east-1") {
  return {
    endpoint,
    region,
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  };
}

export function emulatorClients(endpoint: string, region = "us-east-1"): AwsClients {
  const config = {
    ...emulatorConfig(endpoint, region),
    // Every SQS poller of the runtime holds a socket for its long poll (dozens at once): with the
    // SDK's default of 50 sockets, other calls queued behind them for whole long polls.
    requestHandler: { httpAgent: { keepAlive: true, maxSockets: 1024 } },
  };
  return {
    dynamodb: new DynamoDBClient(config),
    sqs: new SQSClient(config),
    eventbridge: new EventBridgeClient(config),
    kms: new KMSClient(config),
    sns: new SNSClient(config),
  };
}
