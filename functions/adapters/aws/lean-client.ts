import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import {
  isServerError,
  isThrottlingError,
  isTransientError,
  StandardRetryStrategy,
} from "@smithy/core/retry";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsClient, AwsCommand, AwsService, ResponseMetadata } from "./client";
import type { CborCodec } from "./lean/cbor";
import {
  type ContainerEndpointOptions,
  CredentialSource,
  type Credentials,
} from "./lean/credentials";
import { endpointOf, SERVICES } from "./lean/services";
import { decodeResponse, encodeRequest, requestIdOf, type WireResponse } from "./lean/wire";

/**
 * The AWS client of every Lambda function: the AWS SDK v3's own SigV4 signer
 * (`@smithy/signature-v4`), HTTP handler (`@smithy/node-http-handler`, keep-alive) and standard
 * retry strategy (`@smithy/core/retry`: 3 attempts, backoff with jitter, a retry quota), with the
 * protocol of each service written out in ./lean/wire for the operations AgentBus calls. The SDK's
 * clients carry every operation's model and every credential source: three of them were 244 KB
 * of each bundle and most of its init time (`npm run bench -- bundles`). Credentials come from
 * the environment, where Lambda puts the execution role's, or from the container credentials
 * endpoint (./lean/credentials); the operator's tools, which need profiles and SSO, use the SDK
 * clients (./sdk-client).
 */

/** What sends one signed request (tests give a recorder). */
export interface HttpSender {
  handle(request: HttpRequestLike): Promise<{ response: HttpResponseLike }>;
}
export interface HttpRequestLike {
  readonly method: string;
  readonly protocol: string;
  readonly hostname: string;
  readonly port?: number;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly headers: Record<string, string>;
  /** Text, or bytes (RPC v2 CBOR). */
  readonly body: string | Uint8Array;
}
export interface HttpResponseLike {
  readonly statusCode: number;
  readonly headers: Record<string, string | undefined>;
  readonly body?: AsyncIterable<Uint8Array | string>;
}

export interface LeanClientOptions {
  /** Default: `AWS_REGION`, else `AWS_DEFAULT_REGION`. */
  readonly region?: string;
  /**
   * Default: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, read per call,
   * else the container credentials endpoint's (./lean/credentials), kept until near expiry. A
   * function is asked before each signature: an SDK client's `config.credentials` (its provider
   * chain: profiles, SSO, ...) signs a service no SDK client speaks (./sdk-client).
   */
  readonly credentials?: Credentials | (() => Promise<Credentials>);
  /** How the container credentials endpoint is asked (retries, timeout). */
  readonly containerEndpoint?: ContainerEndpointOptions;
  /** One endpoint for every service (an emulator), or one per service. */
  readonly endpoint?: string | Partial<Record<AwsService, string>>;
  /** Attempts per call, retries included. Default: `AWS_MAX_ATTEMPTS`, else 3 (the SDK's). */
  readonly maxAttempts?: number;
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly http?: HttpSender;
  /**
   * The CBOR codec (./lean/cbor's `CBOR`) for the services that speak RPC v2 CBOR (eventbridgev2),
   * given where one is called, so that the bundles of the functions that call none do not carry it.
   */
  readonly cbor?: CborCodec;
}

type Data = string | ArrayBuffer | ArrayBufferView;

function bytes(data: Data): string | Uint8Array {
  if (typeof data === "string") return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** Node's hashes in the shape the signer takes (the SDK's `@smithy/hash-node`, inlined). */
export class Sha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: Data) {
    this.hash = secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(secret));
  }
  update(data: Data): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return this.hash.digest();
  }
}

export class LeanAwsClient implements AwsClient {
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly http: HttpSender;
  private readonly retry: StandardRetryStrategy;
  private readonly signers = new Map<AwsService, SignatureV4>();
  private readonly endpoints = new Map<AwsService, URL>();
  private readonly credentialSource: CredentialSource;
  /**
   * Milliseconds to add to this machine's clock to sign as the services' clocks read: learnt from
   * each response's `Date` header, as the SDK keeps its `systemClockOffset`. A signature more than
   * five minutes off is refused; the refusal, once the offset is corrected, is retried.
   */
  private clockOffset = 0;

  constructor(private readonly options: LeanClientOptions = {}) {
    this.env = options.env ?? process.env;
    this.http = options.http ?? (new NodeHttpHandler() as unknown as HttpSender);
    const maxAttempts = options.maxAttempts ?? Number(this.env.AWS_MAX_ATTEMPTS ?? 3);
    this.retry = new StandardRetryStrategy(Math.max(1, maxAttempts || 3));
    this.credentialSource = new CredentialSource(this.env, options.containerEndpoint);
  }

  async send<I extends object, O extends object>(
    command: AwsCommand<I, O>,
  ): Promise<O & { readonly $metadata: ResponseMetadata }> {
    let token = await this.retry.acquireInitialRetryToken(command.service);
    let attempts = 0;
    let totalRetryDelay = 0;
    for (;;) {
      attempts += 1;
      try {
        const { output, metadata } = await this.attempt(command);
        this.retry.recordSuccess(token);
        const $metadata = { ...metadata, attempts, totalRetryDelay };
        return Object.assign(output, { $metadata }) as O & { $metadata: ResponseMetadata };
      } catch (error) {
        noteMetadata(error, { attempts });
        const waiting = Date.now();
        try {
          // Waits out the backoff, or refuses: not retryable, attempts or retry quota spent.
          token = await this.retry.refreshRetryTokenForRetry(token, {
            errorType: retryErrorType(error),
          });
        } catch {
          throw error;
        }
        totalRetryDelay += Date.now() - waiting;
      }
    }
  }

  /** The client's region, read when a call needs it (as the SDK does). */
  get region(): string {
    const region = this.options.region ?? this.env.AWS_REGION ?? this.env.AWS_DEFAULT_REGION;
    if (!region)
      throw new Error("no AWS region: set AWS_REGION (Lambda sets it) or give the client a region");
    return region;
  }

  private async attempt(command: AwsCommand) {
    const { cbor } = this.options;
    const wire = encodeRequest(command.service, command.operation, command.input, cbor);
    const url = this.endpoint(command.service);
    const port = url.port ? Number(url.port) : undefined;
    const request: HttpRequestLike = {
      method: wire.method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(port === undefined ? {} : { port }),
      path: `${url.pathname.replace(/\/$/, "")}${wire.path}`,
      query: {},
      headers: {
        host: url.host,
        "user-agent": "agentbus",
        ...wire.headers,
        ...command.headers,
      },
      body: wire.body,
    };
    const offset = this.clockOffset;
    const sentAt = Date.now();
    const signed = (await this.signer(command.service).sign(request as never, {
      signingDate: new Date(sentAt + offset),
    })) as unknown as HttpRequestLike;
    const { response } = await this.http.handle(signed);
    const bytes = await bytesOf(response.body);
    const answer: WireResponse = {
      status: response.statusCode,
      headers: response.headers,
      body: bytes.toString("utf8"),
      bytes,
    };
    this.sampleClock(answer.headers, sentAt);
    let output: object;
    try {
      output = decodeResponse(command.service, command.operation, answer, cbor);
    } catch (error) {
      // Refused as signed at the wrong time: retried once the offset is right (as the SDK does).
      if (Math.abs(this.clockOffset) >= SKEW_CORRECTED_MS && this.clockOffset !== offset)
        noteMetadata(error, { clockSkewCorrected: true });
      throw error;
    }
    const requestId = requestIdOf(command.service, answer);
    return { output, metadata: { httpStatusCode: answer.status, requestId } };
  }

  /** The clock offset a response's `Date` header tells (the SDK's getUpdatedSystemClockOffset). */
  private sampleClock(headers: WireResponse["headers"], sentAt: number): void {
    // A cached answer's date is not the server's now; nor is one that took a quarter of an hour.
    if (headers.age !== undefined || !headers.date) return;
    const serverTime = Date.parse(headers.date);
    const receivedAt = Date.now();
    if (Number.isNaN(serverTime) || receivedAt - sentAt > 900_000) return;
    this.clockOffset = serverTime - receivedAt;
  }

  /** A service's endpoint, resolved on its first call. */
  private endpoint(service: AwsService): URL {
    let url = this.endpoints.get(service);
    if (!url) {
      const given = this.options.endpoint;
      const configured = typeof given === "string" ? given : given?.[service];
      url = endpointOf(service, this.region, this.env, configured);
      this.endpoints.set(service, url);
    }
    return url;
  }

  private signer(service: AwsService): SignatureV4 {
    let signer = this.signers.get(service);
    if (!signer) {
      signer = new SignatureV4({
        service: SERVICES[service].signingName,
        region: this.region,
        sha256: Sha256,
        credentials: async () => this.credentials(),
      });
      this.signers.set(service, signer);
    }
    return signer;
  }

  private async credentials(): Promise<Credentials> {
    const given = this.options.credentials;
    if (typeof given === "function") return given();
    return given ?? this.credentialSource.get();
  }
}

async function bytesOf(body: AsyncIterable<Uint8Array | string> | undefined): Promise<Buffer> {
  if (!body) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  for await (const chunk of body)
    chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** The SDK's classification of an error for its retry strategy. */
function retryErrorType(error: unknown) {
  const e = error as Parameters<typeof isThrottlingError>[0];
  if (isThrottlingError(e)) return "THROTTLING" as const;
  if (isTransientError(e)) return "TRANSIENT" as const;
  if (isServerError(e)) return "SERVER_ERROR" as const;
  return "CLIENT_ERROR" as const;
}

/** An offset from this size on, a refused call is retried with it (the SDK's threshold). */
const SKEW_CORRECTED_MS = 240_000;

/**
 * Adds `fields` to an error's `$metadata`: the attempts made, or `clockSkewCorrected`, which tells
 * the retry strategy the call may succeed now (`isClockSkewCorrectedError`).
 */
function noteMetadata(
  error: unknown,
  fields: Partial<ResponseMetadata> & { clockSkewCorrected?: boolean },
): void {
  if (!error || typeof error !== "object") return;
  const e = error as { $metadata?: ResponseMetadata };
  try {
    e.$metadata = { ...e.$metadata, ...fields };
  } catch {
    // a frozen error keeps what it has
  }
}
