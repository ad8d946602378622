import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import type { AwsClient } from "../adapters/aws/client";
import { eventBridgeV2Client } from "../adapters/aws/eventbridge-v2";
import { sdkAwsClient } from "../adapters/aws/sdk-client";

let shared: AwsClient | undefined;

/**
 * The container's AWS client for every service, made on first use: the AWS SDK v3 clients
 * (../adapters/aws/sdk-client), each made on its service's first call and kept for the
 * container's life.
 */
export function containerAwsClient(): AwsClient {
  shared ??= sdkAwsClient();
  return shared;
}

let eventBridgeV2: AwsClient | undefined;

/**
 * The container's client of EventBridge's new buses (`eventbridgev2`, which no SDK client speaks:
 * ../adapters/aws/eventbridge-v2), on an SDK EventBridge client's credentials, region, HTTP
 * handler and retries. Apart from the shared one, so that only the bundles of the functions that
 * call it (the relay) carry it.
 */
export function containerEventBridgeV2Client(): AwsClient {
  eventBridgeV2 ??= eventBridgeV2Client(new EventBridgeClient());
  return eventBridgeV2;
}
