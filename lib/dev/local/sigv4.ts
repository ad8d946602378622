import { createHash, timingSafeEqual } from "node:crypto";
import { Sha256 } from "@smithy/core/checksum";
import { SignatureV4 } from "@smithy/signature-v4";

/**
 * What API Gateway's IAM authorization checks of a signed request, for the local front door (and
 * what an AWS service checks, for the local eventbridgev2 endpoint, ./subscriber-bus-endpoint.ts):
 * a Signature Version 4 (`AWS4-HMAC-SHA256`) for the service `execute-api` (or the one given) by
 * known credentials, dated within 15 minutes. The signature is computed again, over the headers
 * the request says it signed, with the same signer the SDK uses, and compared. A deployed stack's
 * IAM also checks the caller's policy (which tenants' paths it may call); locally, the credentials
 * may call any.
 */

export interface LocalCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

export interface SignedRequest {
  readonly method: string;
  readonly url: URL;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;
const MAX_SKEW_MS = 15 * 60 * 1000;

/** The signer's ARN, or why the request is refused (API Gateway answers 403). */
export async function verifySignature(
  request: SignedRequest,
  credentials: LocalCredentials,
  now = new Date(),
  signingName = "execute-api",
): Promise<{ principal: string } | { problem: string }> {
  const match = AUTHORIZATION.exec(request.headers.authorization ?? "");
  if (!match) return { problem: "Missing Authentication Token: sign the request (SigV4)" };
  const [, keyId, , region, service, signedHeaders, signature] = match as unknown as string[];
  if (service !== signingName)
    return { problem: `the request is signed for ${service}, not ${signingName}` };
  if (keyId !== credentials.accessKeyId)
    return { problem: "The security token included in the request is invalid" };
  const date = request.headers["x-amz-date"] ?? "";
  const signedAt = Date.parse(
    date.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, "$1-$2-$3T$4:$5:$6Z"),
  );
  if (Number.isNaN(signedAt) || Math.abs(now.getTime() - signedAt) > MAX_SKEW_MS)
    return { problem: "Signature expired: the request's x-amz-date is not within 15 minutes" };
  const expected = await signatureOf(request, credentials, {
    region: region ?? "",
    service: signingName,
    signedHeaders: signedHeaders ?? "",
    signedAt,
  });
  const same =
    expected.length === signature?.length &&
    timingSafeEqual(Buffer.from(expected), Buffer.from(signature));
  if (!same)
    return {
      problem: "The request signature we calculated does not match the signature you provided",
    };
  return { principal: `arn:aws:iam::000000000000:user/${keyId}` };
}

async function signatureOf(
  request: SignedRequest,
  credentials: LocalCredentials,
  scope: { region: string; service: string; signedHeaders: string; signedAt: number },
): Promise<string> {
  const { region, service, signedHeaders, signedAt } = scope;
  const names = signedHeaders.split(";");
  const headers: Record<string, string> = Object.fromEntries(
    names.flatMap((name) => {
      const value = request.headers[name];
      return value === undefined ? [] : [[name, value]];
    }),
  );
  // The signer would take a payload hash header as given: the body's own hash is what counts.
  if (headers["x-amz-content-sha256"] !== undefined)
    headers["x-amz-content-sha256"] = createHash("sha256").update(request.body).digest("hex");
  // Only the headers the request signed: no x-amz-content-sha256 of its own (curl signs none).
  const signer = new SignatureV4({
    service,
    region,
    sha256: Sha256,
    credentials,
    applyChecksum: false,
  });
  const query = Object.fromEntries(request.url.searchParams);
  const signed = await signer.sign(
    {
      method: request.method,
      protocol: "http:",
      hostname: request.url.hostname,
      port: Number(request.url.port) || undefined,
      path: request.url.pathname,
      query,
      headers,
      // The bytes as sent: a CBOR body is no text.
      body: request.body.length > 0 ? new Uint8Array(request.body) : undefined,
    },
    { signingDate: new Date(signedAt) },
  );
  const authorization = String(signed.headers.authorization ?? "");
  return /Signature=([0-9a-f]{64})$/.exec(authorization)?.[1] ?? "";
}
