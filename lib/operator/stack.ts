import { CloudWatchClient } from "@aws-sdk/client-cloudwatch";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { KMSClient } from "@aws-sdk/client-kms";
import { SQSClient } from "@aws-sdk/client-sqs";
import { GetParameterCommand, PutParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { kmsKeyWrapping } from "../../functions/adapters/aws/kms-key-wrapping";
import { DynamoCustomerKeys } from "../../functions/adapters/dynamodb/customer-keys";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { Vault } from "../../functions/core/personal-data/vault";
import { fromSdk } from "./from-sdk";
import { type StackNames, stackNames, type TopologyNames } from "./names";

/** How to reach AWS: an endpoint (an emulator) or the default one, and the region. */
export interface ClientConfig {
  readonly region: string;
  readonly endpoint?: string;
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

/** A deployed (or local) stack as the operator tools see it: its names and the clients to read. */
export interface OpsStack {
  readonly stackName: string;
  /** How its clients reach AWS (the operator tools that send use it too). */
  readonly config: ClientConfig;
  readonly names: StackNames;
  readonly outputs: Readonly<Record<string, string>>;
  readonly groups: readonly string[];
  readonly dynamodb: DynamoDBClient;
  readonly sqs: SQSClient;
  readonly cloudwatch: CloudWatchClient;
  /**
   * Opens the personal fields the event store keeps sealed (functions/core/personal-data): what
   * trace, rebuild and republish read is as the consumers read it; absent for a stack without
   * customer keys.
   */
  readonly vault?: Vault;
  close(): void;
}

/**
 * The SSM parameter under which the local stack publishes its outputs (as `cdk deploy
 * --outputs-file` would write them for one stack), so that `--endpoint` alone finds its names.
 */
export function outputsParameter(stackName: string): string {
  return `/${stackName}/outputs`;
}

/**
 * The output under which the local stack publishes its `eventbridgev2` endpoint
 * (lib/dev/local/subscriber-bus-endpoint.ts): no emulator serves that API, so `agentbus replay
 * --endpoint` finds it here.
 */
export const LOCAL_EVENTBRIDGEV2_ENDPOINT = "LocalEventBridgeV2Endpoint";

/** Publish a stack's outputs where `readPublishedOutputs` finds them (the local stack does). */
export async function publishOutputs(
  config: ClientConfig,
  stackName: string,
  outputs: Readonly<Record<string, string>>,
): Promise<void> {
  const ssm = new SSMClient(config);
  try {
    await ssm.send(
      new PutParameterCommand({
        Name: outputsParameter(stackName),
        Type: "String",
        Overwrite: true,
        Value: JSON.stringify(outputs),
      }),
    );
  } finally {
    ssm.destroy();
  }
}

/** The outputs a local stack published, or undefined when there are none at the endpoint. */
export async function readPublishedOutputs(
  config: ClientConfig,
  stackName: string,
): Promise<Record<string, string> | undefined> {
  const ssm = new SSMClient(config);
  try {
    const { Parameter } = await ssm.send(
      new GetParameterCommand({ Name: outputsParameter(stackName) }),
    );
    return Parameter?.Value ? (JSON.parse(Parameter.Value) as Record<string, string>) : undefined;
  } catch (error) {
    if (error instanceof Error && error.name === "ParameterNotFound") return undefined;
    throw error;
  } finally {
    ssm.destroy();
  }
}

/** `OrderLookup` -> `order-lookup`: the inverse of the stack's output ids (lib/infra/output-ids.ts). */
function kebab(id: string): string {
  return id.replace(/(?<!^)([A-Z])/g, "-$1").toLowerCase();
}

/**
 * The topics and consumer groups a stack has, read from its outputs (`<Topic>BusName`, and
 * `<Group>QueueUrl` beside `<Group>DeadLetterQueueUrl`): the operator tools work on any
 * topology, not only the project's.
 */
export function topologyOfOutputs(outputs: Readonly<Record<string, string>>): TopologyNames {
  const ids = (suffix: string) =>
    Object.keys(outputs)
      .filter((key) => key.endsWith(suffix))
      .map((key) => key.slice(0, -suffix.length));
  const withDlq = new Set(ids("DeadLetterQueueUrl"));
  const groups = ids("QueueUrl").filter(
    (id) => withDlq.has(id) && !(id.endsWith("Buffer") && withDlq.has(id.slice(0, -6))),
  );
  return {
    topics: ids("BusName").map(kebab),
    groups: groups.map((id) => ({ name: kebab(id) })),
  };
}

/** Connect to a stack by its outputs; every name a reader needs must be among them. */
export function connect(
  config: ClientConfig,
  stackName: string,
  outputs: Readonly<Record<string, string>>,
  topology: TopologyNames = topologyOfOutputs(outputs),
): OpsStack {
  const names = stackNames(outputs, topology);
  const dynamodb = new DynamoDBClient(config);
  const sqs = new SQSClient(config);
  const cloudwatch = new CloudWatchClient(config);
  const kms = new KMSClient(config);
  const vault = stackVault(names, dynamodb, kms);
  return {
    stackName,
    config,
    names,
    outputs,
    groups: topology.groups.map((g) => g.name),
    dynamodb,
    sqs,
    cloudwatch,
    ...(vault ? { vault } : {}),
    close: () => {
      dynamodb.destroy();
      sqs.destroy();
      cloudwatch.destroy();
      kms.destroy();
    },
  };
}

/** The vault of a stack whose outputs name its customer keys. */
export function stackVault(
  names: StackNames,
  dynamodb: DynamoDBClient,
  kms: KMSClient,
): Vault | undefined {
  const table = names.tables.customerKeys;
  const key = names.customerKeysKey;
  if (!table || !key) return undefined;
  return new Vault({
    keys: new DynamoCustomerKeys({ client: fromSdk(dynamodb), tableName: table }),
    wrapping: kmsKeyWrapping(fromSdk(kms), key),
  });
}

/** The stack's event store as the operator's tools read and write it (opened by its vault). */
export function eventStoreOf(stack: OpsStack): DynamoEventStore {
  return new DynamoEventStore({
    client: fromSdk(stack.dynamodb),
    tables: stack.names.tables,
    ...(stack.vault ? { vault: stack.vault } : {}),
  });
}
