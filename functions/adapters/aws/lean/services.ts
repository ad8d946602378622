import type { AwsService } from "../client";

/** How a service is reached and spoken to: the AWS SDK v3 clients' own settings. */
export interface ServiceSpec {
  /** SigV4 signing name. */
  readonly signingName: string;
  /** `AWS_ENDPOINT_URL_<ID>`: the SDK's environment variable for this service's endpoint. */
  readonly envId: string;
  /** The X-Ray subsegment name, as the X-Ray SDK names the service. */
  readonly traceName: string;
  readonly protocol:
    | { readonly kind: "json"; readonly version: "1.0" | "1.1"; readonly targetPrefix: string }
    | { readonly kind: "restJson" }
    | { readonly kind: "query"; readonly version: string };
}

export const SERVICES: Readonly<Record<AwsService, ServiceSpec>> = {
  dynamodb: {
    signingName: "dynamodb",
    envId: "DYNAMODB",
    traceName: "DynamoDB",
    protocol: { kind: "json", version: "1.0", targetPrefix: "DynamoDB_20120810" },
  },
  sqs: {
    signingName: "sqs",
    envId: "SQS",
    traceName: "SQS",
    protocol: { kind: "json", version: "1.0", targetPrefix: "AmazonSQS" },
  },
  events: {
    signingName: "events",
    envId: "EVENTBRIDGE",
    traceName: "EventBridge",
    protocol: { kind: "json", version: "1.1", targetPrefix: "AWSEvents" },
  },
  sns: {
    signingName: "sns",
    envId: "SNS",
    traceName: "SNS",
    protocol: { kind: "query", version: "2010-03-31" },
  },
  "bedrock-runtime": {
    signingName: "bedrock",
    envId: "BEDROCK_RUNTIME",
    traceName: "BedrockRuntime",
    protocol: { kind: "restJson" },
  },
};

/** The DNS suffix of a region's partition. */
function dnsSuffix(region: string): string {
  if (region.startsWith("cn-")) return "amazonaws.com.cn";
  if (region.startsWith("us-isob-")) return "sc2s.sgov.gov";
  if (region.startsWith("us-iso-")) return "c2s.ic.gov";
  return "amazonaws.com";
}

/**
 * A service's endpoint, as the SDK resolves it: the client's `endpoint`, else
 * `AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`, else the regional endpoint (its FIPS
 * variant with `AWS_USE_FIPS_ENDPOINT=true`).
 */
export function endpointOf(
  service: AwsService,
  region: string,
  env: Readonly<Record<string, string | undefined>>,
  configured?: string,
): URL {
  const explicit =
    configured ?? env[`AWS_ENDPOINT_URL_${SERVICES[service].envId}`] ?? env.AWS_ENDPOINT_URL;
  if (explicit) return new URL(explicit);
  const fips = env.AWS_USE_FIPS_ENDPOINT?.toLowerCase() === "true" ? "-fips" : "";
  return new URL(`https://${service}${fips}.${region}.${dnsSuffix(region)}`);
}
