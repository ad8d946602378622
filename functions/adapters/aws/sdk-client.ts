import type { AwsClient, AwsCommand, SdkBinding, SdkClient } from "./client";

export type { SdkClient } from "./client";

interface SdkCommand {
  readonly middlewareStack: {
    // biome-ignore lint/suspicious/noExplicitAny: the SDK's overloaded `add` takes every step's middleware type
    add(middleware: any, options: { step: "build"; name: string }): void;
  };
}

type Next = (args: { request: unknown }) => Promise<unknown>;

/**
 * An SDK v3 client as the functions' AWS port (./client): what the operator's tools, the local
 * runtime and the tests give the adapters, so that their credential chain, middleware (the meter,
 * fault injection) and endpoint settings apply. The client must be the command's service's: a
 * DynamoDB client for DynamoDB commands.
 */
export function fromSdk(client: SdkClient): AwsClient {
  return {
    send: async (command) => client.send(sdkCommand(command)),
  };
}

function bindingOf(command: AwsCommand): SdkBinding {
  if (!command.sdk)
    throw new Error(`no AWS SDK client sends ${command.service} ${command.operation}`);
  return command.sdk;
}

/** The SDK command of a call, with the call's headers (the X-Ray trace header) added at build. */
function sdkCommand(command: AwsCommand): SdkCommand {
  const sdk = new (bindingOf(command).Command)(command.input as never) as SdkCommand;
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

/**
 * The port on the SDK v3 clients, what every function runs (functions/handlers/aws.ts): the
 * client of each command's service is made on its first call with the SDK's defaults (region,
 * credential chain, retries, keep-alive) and kept. The classes come with the operations
 * (./operations), so a bundle holds the clients its code calls. EventBridge's new buses have no
 * SDK client: ./eventbridge-v2.
 */
export function sdkAwsClient(): AwsClient {
  const clients = new Map<SdkBinding["Client"], AwsClient>();
  return {
    send: async (command) => {
      const { Client } = bindingOf(command);
      let client = clients.get(Client);
      if (!client) {
        client = fromSdk(new Client());
        clients.set(Client, client);
      }
      return client.send(command);
    },
  };
}
