import type { AwsClient } from "../adapters/aws/client";
import { CBOR } from "../adapters/aws/lean/cbor";
import { LeanAwsClient } from "../adapters/aws/lean-client";
import { sdkAwsClient } from "../adapters/aws/sdk-client";

let shared: AwsClient | undefined;

/**
 * The container's AWS client for every service, made on first use: the lean client
 * (../adapters/aws/lean-client), or the SDK v3 clients (../adapters/aws/sdk-client) where
 * `AGENTBUS_AWS_CLIENT` is `sdk`. A bundle has that name replaced by its build's choice
 * (`-c agentbus:awsClient`, lib/infra/constructs/bundling.ts), so the minifier drops the other
 * branch and what only it imports: a lean bundle holds no SDK client. Unbundled (tests, the
 * local runtime), the environment variable chooses.
 */
export function containerAwsClient(): AwsClient {
  shared ??= process.env.AGENTBUS_AWS_CLIENT === "sdk" ? sdkAwsClient() : new LeanAwsClient();
  return shared;
}

let eventBridgeV2: AwsClient | undefined;

/**
 * The container's client of EventBridge's new buses (`eventbridgev2`, RPC v2 CBOR), made on first
 * use: the lean client with the CBOR codec, or the SDK's (../adapters/aws/sdk-client, which sends
 * these calls through the lean client with the SDK's credentials). Apart from the shared one, so
 * that only the bundles of the functions that call it (the relay) carry the codec.
 */
export function containerEventBridgeV2Client(): AwsClient {
  eventBridgeV2 ??=
    process.env.AGENTBUS_AWS_CLIENT === "sdk" ? sdkAwsClient() : new LeanAwsClient({ cbor: CBOR });
  return eventBridgeV2;
}
