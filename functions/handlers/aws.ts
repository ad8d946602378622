import type { AwsClient } from "../adapters/aws/client";
import { LeanAwsClient } from "../adapters/aws/lean-client";

let shared: AwsClient | undefined;

/** The container's AWS client for every service (../adapters/aws/lean-client), made on first use. */
export function containerAwsClient(): AwsClient {
  shared ??= new LeanAwsClient();
  return shared;
}
