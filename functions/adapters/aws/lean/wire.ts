import type { AwsService } from "../client";
import type { CborCodec } from "./cbor";
import { queryBody, queryResult, snsErrorName, xmlText } from "./query";
import { SERVICES } from "./services";

/**
 * What goes on the wire for a call, and what comes back, per protocol: JSON 1.0/1.1 (DynamoDB,
 * SQS, EventBridge, KMS), REST-JSON (Bedrock Runtime's Converse), query (SNS) and Smithy RPC v2
 * CBOR (EventBridge's new buses, ./cbor). Blobs travel as base64 and timestamps as epoch seconds,
 * as the protocols define; DynamoDB's binary attributes and KMS's blobs (keys and ciphertexts)
 * come back as `Uint8Array`, as the SDK returns them.
 */

export interface WireRequest {
  readonly method: "POST";
  readonly path: string;
  readonly headers: Record<string, string>;
  /** Text, or bytes for CBOR. */
  readonly body: string | Uint8Array;
}

/** The headers of every RPC v2 CBOR request (smithy.io, "RPC v2 CBOR protocol", Requests). */
export const RPC_V2_CBOR_HEADERS: Readonly<Record<string, string>> = {
  "smithy-protocol": "rpc-v2-cbor",
  "content-type": "application/cbor",
  accept: "application/cbor",
};

/** A refused call, shaped as the SDK's service errors are. */
export class AwsServiceError extends Error {
  readonly $fault: "client" | "server";
  /** Set when the service's model marks this error retryable, as the SDK's errors carry it. */
  readonly $retryable?: { readonly throttling?: boolean };
  $metadata: { httpStatusCode?: number; requestId?: string; attempts?: number };
  constructor(
    name: string,
    message: string,
    status: number,
    requestId: string | undefined,
    fields: Record<string, unknown>,
    retryable = false,
  ) {
    super(message);
    Object.assign(this, fields);
    this.name = name;
    this.$fault = status >= 500 ? "server" : "client";
    if (retryable) this.$retryable = {};
    this.$metadata = { httpStatusCode: status, requestId };
  }
}

/** JSON with blobs as base64 and dates as epoch seconds (`Date.toJSON` would give ISO text). */
function jsonText(input: object): string {
  return JSON.stringify(input, function (this: Record<string, unknown>, key, value) {
    const raw = this[key];
    if (raw instanceof Uint8Array)
      return Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("base64");
    if (raw instanceof Date) return raw.getTime() / 1000;
    return value;
  });
}

function binary(text: string): Uint8Array {
  const bytes = Buffer.from(text, "base64");
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** DynamoDB's `B` and `BS` attribute values back to bytes. */
function dynamoReviver(key: string, value: unknown): unknown {
  if (key === "B" && typeof value === "string") return binary(value);
  if (key === "BS" && Array.isArray(value) && value.every((v) => typeof v === "string"))
    return value.map(binary);
  return value;
}

/** The members KMS's model types as blobs in the outputs of GenerateDataKey and Decrypt. */
const KMS_BLOBS: ReadonlySet<string> = new Set([
  "Plaintext",
  "CiphertextBlob",
  "CiphertextForRecipient",
]);

/** KMS's blob members back to bytes. */
function kmsReviver(key: string, value: unknown): unknown {
  return KMS_BLOBS.has(key) && typeof value === "string" ? binary(value) : value;
}

type Reviver = (key: string, value: unknown) => unknown;

/** How each service's JSON answers are read where a blob in them must come back as bytes. */
const REVIVERS: Partial<Record<AwsService, Reviver>> = { dynamodb: dynamoReviver, kms: kmsReviver };

/** `cbor`: the codec of RPC v2 CBOR (./cbor's `CBOR`), needed for the services that speak it. */
export function encodeRequest(
  service: AwsService,
  operation: string,
  input: object,
  cbor?: CborCodec,
): WireRequest {
  const protocol = SERVICES[service].protocol;
  if (protocol.kind === "json") {
    return {
      method: "POST",
      path: "/",
      headers: {
        "content-type": `application/x-amz-json-${protocol.version}`,
        "x-amz-target": `${protocol.targetPrefix}.${operation}`,
      },
      body: jsonText(input),
    };
  }
  if (protocol.kind === "query") {
    return {
      method: "POST",
      path: "/",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: queryBody(operation, protocol.version, input),
    };
  }
  if (protocol.kind === "rpcv2Cbor") {
    return {
      method: "POST",
      path: `/service/${protocol.service}/operation/${operation}`,
      headers: { ...RPC_V2_CBOR_HEADERS },
      body: codecFor(service, cbor).toCbor(input),
    };
  }
  return restJsonRequest(operation, input);
}

/** Bedrock Runtime's `Converse`: the model id in the path, the rest of the input as the body. */
function restJsonRequest(operation: string, input: object): WireRequest {
  if (operation !== "Converse")
    throw new Error(`the lean AWS client speaks Bedrock Runtime's Converse only, not ${operation}`);
  const { modelId, ...body } = input as { modelId?: string };
  if (!modelId) throw new Error("Converse needs a modelId");
  return {
    method: "POST",
    path: `/model/${encodeURIComponent(modelId)}/converse`,
    headers: { "content-type": "application/json" },
    body: jsonText(body),
  };
}

export interface WireResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The body as text (UTF-8). */
  readonly body: string;
  /** The body's bytes, what a CBOR answer is read from (the text when absent). */
  readonly bytes?: Uint8Array;
}

/** The request id AWS gave a response: its header, or the query protocol's XML. */
export function requestIdOf(service: AwsService, response: WireResponse): string | undefined {
  return (
    response.headers["x-amzn-requestid"] ??
    response.headers["x-amz-request-id"] ??
    (SERVICES[service].protocol.kind === "query" ? xmlText(response.body, "RequestId") : undefined)
  );
}

/** The output of a successful call, or the error of a refused one (thrown). */
export function decodeResponse(
  service: AwsService,
  operation: string,
  response: WireResponse,
  cbor?: CborCodec,
): Record<string, unknown> {
  const protocol = SERVICES[service].protocol;
  const requestId = requestIdOf(service, response);
  const ok = response.status >= 200 && response.status < 300;
  if (protocol.kind === "query") {
    if (ok) return queryResult(operation, response.body);
    const code = xmlText(response.body, "Code") ?? `Http${response.status}`;
    const name = snsErrorName(code);
    throw new AwsServiceError(
      name,
      xmlText(response.body, "Message") ?? code,
      response.status,
      requestId,
      {},
      SERVICES[service].retryableErrors?.includes(name),
    );
  }
  const parsed =
    protocol.kind === "rpcv2Cbor"
      ? parseCbor(response, codecFor(service, cbor))
      : parseJson(response.body, REVIVERS[service]);
  if (ok) return parsed;
  const { __type, message, Message, code, ...fields } = parsed;
  // RPC v2 CBOR names the error in `__type` only (@smithy/core/cbor loadSmithyRpcV2CborErrorCode).
  const type =
    protocol.kind === "rpcv2Cbor"
      ? (__type as string | undefined)
      : (response.headers["x-amzn-errortype"] ?? (code as string) ?? (__type as string));
  const name = errorName(type, response.status);
  // A typed error without a message reads "UnknownError", as the SDK's (KMS sends some so).
  const fallback = type ? "UnknownError" : `HTTP ${response.status}`;
  throw new AwsServiceError(
    name,
    String(message ?? Message ?? fallback),
    response.status,
    requestId,
    fields,
    SERVICES[service].retryableErrors?.includes(name),
  );
}

function codecFor(service: AwsService, cbor: CborCodec | undefined): CborCodec {
  if (!cbor)
    throw new Error(
      `${service} speaks RPC v2 CBOR: give the lean client its codec (cbor: CBOR from ./lean/cbor)`,
    );
  return cbor;
}

/** An RPC v2 CBOR body; one that is not CBOR (a proxy's error page) is kept as the message. */
function parseCbor(response: WireResponse, cbor: CborCodec): Record<string, unknown> {
  try {
    return cbor.fromCbor(response.bytes ?? Buffer.from(response.body));
  } catch {
    return { message: response.body.slice(0, 500) };
  }
}

function parseJson(body: string, reviver: Reviver | undefined): Record<string, unknown> {
  if (body.trim() === "") return {};
  try {
    const value = JSON.parse(body, reviver);
    return value && typeof value === "object" ? value : {};
  } catch {
    return { message: body.slice(0, 500) };
  }
}

/** `com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException` -> the name after `#`. */
function errorName(type: string | undefined, status: number): string {
  if (!type) return status >= 500 ? "InternalServerError" : `Http${status}Error`;
  const bare = type.split(":")[0] ?? type;
  return bare.slice(bare.lastIndexOf("#") + 1);
}
