import type { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import {
  buildHttpRpcRequest,
  cbor,
  dateToTag,
  loadSmithyRpcV2CborErrorCode,
  parseCborBody,
  tagSymbol,
} from "@smithy/core/cbor";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsClient, AwsCommand, ResponseMetadata } from "./client";

/**
 * The client of EventBridge's new buses (`AWS::EventsV2::EventBus`, API `eventbridgev2`
 * 2025-05-15, endpoint prefix `eventsv2`), written here because the AWS SDK for JavaScript has no
 * client for that API. Everything but the protocol is the SDK's, lent by an EventBridge client (the
 * classic API's): its credential chain, region, HTTP handler, retry strategy, clock offset and
 * hash, and the partition's DNS suffix from its endpoint rules. The protocol is Smithy RPC v2
 * CBOR with the SDK's own codec and helpers (`@smithy/core/cbor`): `POST
 * /service/AWSEventsV2/operation/<Operation>`, CBOR both ways, signed (SigV4, `@smithy/signature-v4`)
 * for `events`; an error is named by its `__type`. Sources: the AWS SDK for Rust
 * (awslabs/aws-sdk-rust, sdk/eventbridgev2/src: config.rs `signing_name` "events";
 * operation/put_events.rs, the URI and the headers; config/endpoint.rs, the host
 * `eventsv2.<region>.<dnsSuffix>`, `eventsv2-fips` and the dual-stack suffix) and the AWS SDK for
 * Ruby (aws/aws-sdk-ruby, gems/aws-sdk-eventbridgev2 client_api.rb: protocol `smithy-rpc-v2-cbor`,
 * serviceId `EventBridgeV2`, signingName `events`, targetPrefix `AWSEventsV2`). Retire this module
 * for `@aws-sdk/client-eventbridgev2` when AWS publishes one.
 */

/** The headers of every RPC v2 CBOR request (smithy.io, "RPC v2 CBOR protocol", Requests). */
export const RPC_V2_CBOR_HEADERS: Readonly<Record<string, string>> = {
  "smithy-protocol": "rpc-v2-cbor",
  "content-type": "application/cbor",
  accept: "application/cbor",
};

export interface EventBridgeV2Options {
  /** The endpoint (the local stack's). Default: `AWS_ENDPOINT_URL_EVENTBRIDGEV2`, else `AWS_ENDPOINT_URL`, else the region's. */
  readonly endpoint?: string;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

type Lender = Pick<EventBridgeClient, "config">;
type Config = Lender["config"];
type HttpResponse = Awaited<ReturnType<Config["requestHandler"]["handle"]>>["response"];
/** The SDK's retry strategy (`RetryStrategyV2`), what `retryStrategy` resolves to unless replaced. */
type RetryStrategy = Extract<
  Awaited<ReturnType<Config["retryStrategy"]>>,
  { acquireInitialRetryToken: unknown }
>;
/** What `@smithy/core/cbor`'s helpers read of a client's configuration. */
type SerdeContext = Parameters<typeof parseCborBody>[1];

/** The `eventbridgev2` API as the functions' AWS port, on what `sdk` lends (see above). */
export function eventBridgeV2Client(sdk: Lender, options: EventBridgeV2Options = {}): AwsClient {
  const { config } = sdk;
  let endpoint: Promise<URL> | undefined;
  const signer = new SignatureV4({
    service: "events",
    region: config.region,
    sha256: config.sha256,
    credentials: config.credentials,
  });
  const attempt = async (command: AwsCommand) => {
    // Resolved once; a failure (no region yet) is tried again on the next call.
    endpoint ??= endpointOf(sdk, options).catch((error: unknown) => {
      endpoint = undefined;
      throw error;
    });
    const url = await endpoint;
    const request = await buildHttpRpcRequest(
      { endpoint: async () => endpointParts(url) } as SerdeContext,
      { host: url.host, ...RPC_V2_CBOR_HEADERS, ...command.headers },
      `/service/AWSEventsV2/operation/${command.operation}`,
      undefined,
      toCbor(command.input),
    );
    const signingDate = new Date(Date.now() + (config.systemClockOffset ?? 0));
    const signed = await signer.sign(request, { signingDate });
    const { response } = await config.requestHandler.handle(signed as never);
    return read(response, config);
  };
  return {
    send: async (command) => {
      const output = await withRetries(config, () => attempt(command));
      return output as never;
    },
  };
}

/** `attempt`, retried as the SDK's retry strategy (`config.retryStrategy`) decides. */
async function withRetries(
  config: Config,
  attempt: () => Promise<Record<string, unknown> & { $metadata: ResponseMetadata }>,
) {
  const retry = (await config.retryStrategy()) as RetryStrategy;
  if (!("acquireInitialRetryToken" in retry))
    throw new Error("eventbridgev2 needs an SDK retry strategy of the current interface (V2)");
  let token = await retry.acquireInitialRetryToken("eventsv2");
  let totalRetryDelay = 0;
  for (let attempts = 1; ; attempts++) {
    try {
      const output = await attempt();
      retry.recordSuccess(token);
      return Object.assign(output, {
        $metadata: { ...output.$metadata, attempts, totalRetryDelay },
      });
    } catch (error) {
      const e = error as { $metadata?: ResponseMetadata };
      if (e && typeof e === "object") e.$metadata = { ...e.$metadata, attempts, totalRetryDelay };
      const waiting = Date.now();
      try {
        token = await retry.refreshRetryTokenForRetry(token, { errorType: errorType(error) });
      } catch {
        throw error;
      }
      totalRetryDelay += Date.now() - waiting;
    }
  }
}

/** The SDK's classification of an error for its retry strategy. */
function errorType(error: unknown) {
  const e = error as Parameters<typeof isThrottlingError>[0];
  if (isThrottlingError(e)) return "THROTTLING" as const;
  if (isTransientError(e)) return "TRANSIENT" as const;
  if (isServerError(e)) return "SERVER_ERROR" as const;
  return "CLIENT_ERROR" as const;
}

/** The output of an answer, or its error (thrown), shaped as the SDK's service errors are. */
async function read(response: HttpResponse, config: Config) {
  const $metadata = {
    httpStatusCode: response.statusCode,
    requestId: response.headers["x-amzn-requestid"],
  };
  let body: Record<string, unknown>;
  try {
    body = decoded(await parseCborBody(response.body, config as unknown as SerdeContext)) as Record<
      string,
      unknown
    >;
  } catch (error) {
    body = { message: (error as { $responseBodyText?: string }).$responseBodyText?.slice(0, 500) };
  }
  if (response.statusCode >= 200 && response.statusCode < 300) return { ...body, $metadata };
  const { __type, message, Message, ...fields } = body;
  const code = loadSmithyRpcV2CborErrorCode(response, body) ?? `Http${response.statusCode}Error`;
  const error = new Error(String(message ?? Message ?? `HTTP ${response.statusCode}`));
  throw Object.assign(error, fields, {
    name: code.slice(code.lastIndexOf("#") + 1),
    $fault: response.statusCode >= 500 ? "server" : "client",
    $metadata,
  });
}

/**
 * The endpoint: the one given or configured, else `eventsv2[-fips].<region>.<suffix>`, the suffix
 * the partition's (dual-stack or not) as the SDK's endpoint rules give it for the classic API.
 */
async function endpointOf(sdk: Lender, options: EventBridgeV2Options): Promise<URL> {
  const env = options.env ?? process.env;
  const given = options.endpoint ?? env.AWS_ENDPOINT_URL_EVENTBRIDGEV2 ?? env.AWS_ENDPOINT_URL;
  if (given) return new URL(given);
  const { config } = sdk;
  const Region = await config.region();
  const UseFIPS = await config.useFipsEndpoint();
  const UseDualStack = await config.useDualstackEndpoint();
  const { hostname } = config.endpointProvider({ Region, UseFIPS, UseDualStack }).url;
  const at = hostname.indexOf(`.${Region}.`);
  if (at < 0)
    throw new Error(`no eventbridgev2 host for ${Region}: EventBridge's endpoint is ${hostname}`);
  const suffix = hostname.slice(at + Region.length + 2);
  return new URL(`https://eventsv2${UseFIPS ? "-fips" : ""}.${Region}.${suffix}`);
}

function endpointParts(url: URL) {
  const port = url.port ? Number(url.port) : undefined;
  const protocol = url.protocol;
  return { hostname: url.hostname, protocol, path: url.pathname, ...(port ? { port } : {}) };
}

/** A structure as CBOR: undefined members left out, a `Date` as tag 1 over epoch seconds. */
export function toCbor(input: object): Uint8Array {
  return cbor.serialize(encodable(input));
}

/** A structure from CBOR, tag 1 back to a `Date`; an empty body is an empty structure. */
export function fromCbor(bytes: Uint8Array): Record<string, unknown> {
  if (bytes.byteLength === 0) return {};
  const value = decoded(cbor.deserialize(bytes));
  return value && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function encodable(value: unknown): unknown {
  if (value instanceof Date) return dateToTag(value);
  if (value instanceof Uint8Array || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(encodable);
  const members: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value))
    if (member !== undefined) members[key] = encodable(member);
  return members;
}

function decoded(value: unknown): unknown {
  if (value instanceof Uint8Array || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(decoded);
  if ((value as { [tagSymbol]?: boolean })[tagSymbol]) {
    const tagged = value as { tag: number | bigint; value: unknown };
    return Number(tagged.tag) === 1 ? new Date(Number(tagged.value) * 1000) : decoded(tagged.value);
  }
  return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, decoded(member)]));
}
