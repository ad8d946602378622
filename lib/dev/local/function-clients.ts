import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { KMSClient } from "@aws-sdk/client-kms";
import { SQSClient } from "@aws-sdk/client-sqs";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import type { AwsClients } from "./deploy";
import type { FaultInjection, HttpSender } from "./runtime/faults";
import { type FunctionClients, sdkFunctionClients } from "./runtime/handlers";

/** How a client reaches the emulator (../deploy's `emulatorConfig`). */
interface EmulatorConfig {
  readonly endpoint: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

/**
 * The AWS clients the local runtime hands the functions: SDK v3 clients, as a deployed function
 * has (functions/handlers/aws.ts). Without faults at the HTTP seam, the emulator's clients, whose
 * middleware applies (the bench's meter, SDK-middleware faults); with them, clients of their own
 * that send every request through the fault injection's HTTP handler, below the SDK's retries, so
 * that what the functions meet is what the services and the network would give them.
 */
export function functionClientsOf(
  clients: AwsClients,
  injection: FaultInjection | undefined,
  config: EmulatorConfig,
): { readonly functionClients: FunctionClients; destroy(): void } {
  if (!injection?.http) return { functionClients: sdkFunctionClients(clients), destroy: () => {} };
  const own = () => ({
    ...config,
    // Many invocations run at once: the SDK's default of 50 sockets would queue them.
    requestHandler: injection.http?.(
      new NodeHttpHandler({ httpAgent: { keepAlive: true, maxSockets: 1024 } }) as HttpSender,
    ),
  });
  const faulty: AwsClients = {
    dynamodb: new DynamoDBClient(own()),
    sqs: new SQSClient(own()),
    eventbridge: new EventBridgeClient(own()),
    kms: new KMSClient(own()),
  };
  return {
    functionClients: sdkFunctionClients(faulty),
    destroy: () => {
      for (const client of Object.values(faulty)) client?.destroy();
    },
  };
}
