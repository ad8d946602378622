import type { AwsService } from "../client";
import PARTITIONS from "./partitions.json";

/** How a service is reached and spoken to: the AWS SDK v3 clients' own settings. */
/** The whole AWS GovCloud (US) partition, or the regions named. */
type Where = "aws-us-gov" | readonly string[];

export interface ServiceSpec {
  /** SigV4 signing name. */
  readonly signingName: string;
  /** `AWS_ENDPOINT_URL_<ID>`: the SDK's environment variable for this service's endpoint. */
  readonly envId: string;
  /** The X-Ray subsegment name, as the X-Ray SDK names the service. */
  readonly traceName: string;
  /**
   * Where its FIPS endpoint is the plain host name, as its endpoint rule set says
   * (`dynamodb.us-gov-west-1.amazonaws.com`): in the whole AWS GovCloud (US) partition or in the
   * regions named, for the regional endpoint and for the dual-stack one.
   */
  /**
   * The errors its model marks retryable (the SDK's `$retryable`), retried as transient faults
   * although their status says the caller erred.
   */
  readonly retryableErrors?: readonly string[];
  readonly fipsIsPlain?: { readonly regional?: Where; readonly dualStack?: Where };
  readonly protocol:
    | { readonly kind: "json"; readonly version: "1.0" | "1.1"; readonly targetPrefix: string }
    | { readonly kind: "restJson" }
    | { readonly kind: "query"; readonly version: string }
    /** Smithy RPC v2 CBOR: `POST /service/<service>/operation/<operation>`, CBOR both ways. */
    | { readonly kind: "rpcv2Cbor"; readonly service: string };
}

export const SERVICES: Readonly<Record<AwsService, ServiceSpec>> = {
  dynamodb: {
    signingName: "dynamodb",
    envId: "DYNAMODB",
    fipsIsPlain: { regional: "aws-us-gov" },
    traceName: "DynamoDB",
    retryableErrors: ["ReplicatedWriteConflictException"],
    protocol: { kind: "json", version: "1.0", targetPrefix: "DynamoDB_20120810" },
  },
  sqs: {
    signingName: "sqs",
    envId: "SQS",
    fipsIsPlain: { regional: "aws-us-gov" },
    traceName: "SQS",
    protocol: { kind: "json", version: "1.0", targetPrefix: "AmazonSQS" },
  },
  events: {
    signingName: "events",
    envId: "EVENTBRIDGE",
    fipsIsPlain: { regional: ["us-gov-east-1", "us-gov-west-1"], dualStack: "aws-us-gov" },
    traceName: "EventBridge",
    protocol: { kind: "json", version: "1.1", targetPrefix: "AWSEvents" },
  },
  /**
   * EventBridge's new buses (`AWS::EventsV2::EventBus`), API `eventbridgev2` 2025-05-15, which the
   * AWS SDK for JavaScript has no client for, so its protocol is written out here (./wire). From
   * the AWS SDK for Rust (awslabs/aws-sdk-rust, sdk/eventbridgev2/src: config.rs `signing_name`
   * "events"; operation/put_events.rs, the URI `/service/AWSEventsV2/operation/PutEvents` and the
   * headers `smithy-protocol: rpc-v2-cbor`, `content-type` and `accept` `application/cbor`;
   * config/endpoint.rs, the regional host `eventsv2.<region>.<dnsSuffix>`, `eventsv2-fips` and the
   * dual-stack suffix, which is what the rule set resolves unless account-id endpoint routing is
   * asked for) and the AWS SDK for Ruby (aws/aws-sdk-ruby,
   * gems/aws-sdk-eventbridgev2/lib/aws-sdk-eventbridgev2/client_api.rb: endpointPrefix `eventsv2`,
   * protocol `smithy-rpc-v2-cbor`, serviceId `EventBridgeV2`, signingName `events`, targetPrefix
   * `AWSEventsV2`). The IAM actions are `events:*` (aws/agent-toolkit-for-aws,
   * amazon-eventbridge-event-bus/references/authorization.md).
   */
  eventsv2: {
    signingName: "events",
    envId: "EVENTBRIDGEV2",
    traceName: "EventBridgeV2",
    protocol: { kind: "rpcv2Cbor", service: "AWSEventsV2" },
  },
  sns: {
    signingName: "sns",
    envId: "SNS",
    fipsIsPlain: { regional: ["us-gov-east-1", "us-gov-west-1"] },
    traceName: "SNS",
    protocol: { kind: "query", version: "2010-03-31" },
  },
  "bedrock-runtime": {
    signingName: "bedrock",
    envId: "BEDROCK_RUNTIME",
    traceName: "BedrockRuntime",
    retryableErrors: ["ModelNotReadyException"],
    protocol: { kind: "restJson" },
  },
  kms: {
    signingName: "kms",
    envId: "KMS",
    traceName: "KMS",
    protocol: { kind: "json", version: "1.1", targetPrefix: "TrentService" },
  },
};

/** An AWS partition, from the AWS SDK v3's own data (partitions.json, `npm run schemas`). */
export interface Partition {
  readonly id: string;
  readonly dnsSuffix: string;
  readonly dualStackDnsSuffix: string;
  readonly supportsFIPS: boolean;
  readonly supportsDualStack: boolean;
  readonly regionRegex: string;
  /**
   * The regions the SDK lists for it that no pattern puts in it (`aws-global`, ...); the others
   * it lists are left out, its pattern finds them the same.
   */
  readonly unpatternedRegions: readonly string[];
}

/** A region's partition, found as the SDK's `partition()` finds it: by name, by pattern, else aws. */
export function partitionOf(region: string): Partition {
  const partitions: readonly Partition[] = PARTITIONS;
  const found =
    partitions.find((p) => p.unpatternedRegions.includes(region)) ??
    partitions.find((p) => new RegExp(p.regionRegex).test(region)) ??
    partitions.find((p) => p.id === "aws");
  if (!found) throw new Error("partitions.json has no aws partition: run npm run schemas");
  return found;
}

const flag = (value: string | undefined) => value?.toLowerCase() === "true";

/**
 * A service's endpoint, as the SDK resolves it: the client's `endpoint`, else
 * `AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`, else the regional endpoint of the
 * region's partition (its FIPS variant with `AWS_USE_FIPS_ENDPOINT=true`, its dual-stack one with
 * `AWS_USE_DUALSTACK_ENDPOINT=true`).
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
  if (!/^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/.test(region))
    throw new Error(`the AWS region ${JSON.stringify(region)} is not a valid host label`);
  const partition = partitionOf(region);
  const fips = flag(env.AWS_USE_FIPS_ENDPOINT);
  const dualStack = flag(env.AWS_USE_DUALSTACK_ENDPOINT);
  if (fips && !partition.supportsFIPS)
    throw new Error(`FIPS endpoints are not available in the ${partition.id} partition`);
  if (dualStack && !partition.supportsDualStack)
    throw new Error(`dual-stack endpoints are not available in the ${partition.id} partition`);
  const suffix = dualStack ? partition.dualStackDnsSuffix : partition.dnsSuffix;
  const plain = SERVICES[service].fipsIsPlain?.[dualStack ? "dualStack" : "regional"];
  const plainFips = Array.isArray(plain) ? plain.includes(region) : plain === partition.id;
  const variant = fips && !plainFips ? "-fips" : "";
  return new URL(`https://${service}${variant}.${region}.${suffix}`);
}
