import { BedrockRuntimeClient, ConverseCommand } from "@aws-sdk/client-bedrock-runtime";
import {
  BatchGetItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { DecryptCommand, GenerateDataKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import { PublishCommand, SNSClient } from "@aws-sdk/client-sns";
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { AwsClient, AwsCommand, AwsService } from "./client";
import { CBOR } from "./lean/cbor";
import type { Credentials } from "./lean/credentials";
import { LeanAwsClient, type LeanClientOptions } from "./lean-client";

/** An SDK v3 command class: what `client.send` takes. */
// biome-ignore lint/suspicious/noExplicitAny: each command class takes its own input type
type SdkCommandClass = new (input: any) => SdkCommand;
interface SdkCommand {
  readonly middlewareStack: {
    // biome-ignore lint/suspicious/noExplicitAny: the SDK's overloaded `add` takes every step's middleware type
    add(middleware: any, options: { step: "build"; name: string }): void;
  };
}

type Next = (args: { request: unknown }) => Promise<unknown>;

/**
 * The SDK command of each operation in ./operations (the contract test,
 * test/adapters/aws/lean-client.contract.test.ts, sends every one through it). No check runs at
 * load: a bundle that does not call `sdkAwsClient` must be free to drop this module entirely.
 */
const COMMANDS: Readonly<Record<string, SdkCommandClass>> = {
  "dynamodb:GetItem": GetItemCommand,
  "dynamodb:BatchGetItem": BatchGetItemCommand,
  "dynamodb:PutItem": PutItemCommand,
  "dynamodb:UpdateItem": UpdateItemCommand,
  "dynamodb:Query": QueryCommand,
  "dynamodb:TransactWriteItems": TransactWriteItemsCommand,
  "sqs:SendMessage": SendMessageCommand,
  "sqs:SendMessageBatch": SendMessageBatchCommand,
  "sqs:GetQueueAttributes": GetQueueAttributesCommand,
  "sqs:ChangeMessageVisibility": ChangeMessageVisibilityCommand,
  "sqs:ChangeMessageVisibilityBatch": ChangeMessageVisibilityBatchCommand,
  "events:PutEvents": PutEventsCommand,
  "sns:Publish": PublishCommand,
  "bedrock-runtime:Converse": ConverseCommand,
  "kms:GenerateDataKey": GenerateDataKeyCommand,
  "kms:Decrypt": DecryptCommand,
};

/** Any AWS SDK v3 client. */
export interface SdkClient {
  // biome-ignore lint/suspicious/noExplicitAny: the SDK's overloaded `send` takes every command of its client
  send(command: any): Promise<any>;
}

/**
 * An SDK v3 client as the functions' AWS port (./client): what the operator's tools, the local
 * runtime and the tests give the adapters, so that the SDK's credential chain, middleware (the
 * meter, fault injection) and endpoint settings apply. The client must be the
 * command's service's: a DynamoDB client for DynamoDB commands.
 */
export function fromSdk(client: SdkClient): AwsClient {
  return {
    send: (command) => client.send(sdkCommand(command)),
  };
}

function sdkCommand(command: AwsCommand): SdkCommand {
  const Command = COMMANDS[`${command.service}:${command.operation}`];
  if (!Command) throw new Error(`no SDK command for ${command.service} ${command.operation}`);
  const sdk = new Command(command.input);
  const headers = command.headers;
  if (headers) {
    sdk.middlewareStack.add(
      (next: Next) => (args: { request: unknown }) => {
        const request = args.request as { headers?: Record<string, string> };
        if (request.headers) Object.assign(request.headers, headers);
        return next(args);
      },
      { step: "build", name: "agentbusHeaders" },
    );
  }
  return sdk;
}

const SDK_CLIENTS: Readonly<Record<Exclude<AwsService, "eventsv2">, new () => SdkClient>> = {
  dynamodb: DynamoDBClient,
  sqs: SQSClient,
  sns: SNSClient,
  events: EventBridgeClient,
  "bedrock-runtime": BedrockRuntimeClient,
  kms: KMSClient,
};

/**
 * The port on the SDK v3 clients of every service, each made on its first call with the SDK's
 * defaults (region, credential chain, retries): what a function runs when deployed with
 * `-c agentbus:awsClient=sdk` instead of ./lean-client. EventBridge's new buses have no SDK client:
 * their calls go through the lean client, signed with the SDK's credential chain
 * (`withSdkCredentials`).
 */
export function sdkAwsClient(): AwsClient {
  const clients = new Map<AwsService, AwsClient>();
  return {
    send: (command) => {
      let client = clients.get(command.service);
      if (!client) {
        const { service } = command;
        client =
          service === "eventsv2"
            ? withSdkCredentials(new EventBridgeClient())
            : fromSdk(new SDK_CLIENTS[service]());
        clients.set(service, client);
      }
      return client.send(command);
    },
  };
}

/**
 * The lean client (what speaks `eventbridgev2`, which no SDK client does) signing with an SDK
 * client's credentials: its resolved provider chain (environment, profiles, SSO, container, ...),
 * as the operator's tools and an SDK-built function have them.
 */
export function withSdkCredentials(
  sdk: { readonly config: { readonly credentials: () => Promise<Credentials> } },
  options: Omit<LeanClientOptions, "credentials"> = {},
): LeanAwsClient {
  return new LeanAwsClient({ cbor: CBOR, ...options, credentials: () => sdk.config.credentials() });
}
