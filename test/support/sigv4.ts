import { Sha256 } from "@smithy/core/checksum";
import { SignatureV4 } from "@smithy/signature-v4";
import { LOCAL_SERVICE_CREDENTIALS } from "../../lib/dev/local/front-door";

/**
 * The headers of a request to the local front door signed as a service signs it (SigV4 for
 * `execute-api`, the local stack's service credentials); a body is sent as JSON.
 */
export async function serviceSignedHeaders(
  url: URL,
  method: string,
  body?: string,
): Promise<Record<string, string>> {
  const signer = new SignatureV4({
    service: "execute-api",
    region: "us-east-1",
    sha256: Sha256,
    credentials: LOCAL_SERVICE_CREDENTIALS,
  });
  const headers: Record<string, string> = { host: url.host };
  if (body !== undefined) headers["content-type"] = "application/json";
  const signed = await signer.sign({
    method,
    protocol: url.protocol,
    hostname: url.hostname,
    port: Number(url.port),
    path: url.pathname,
    headers,
    ...(body === undefined ? {} : { body }),
  });
  return signed.headers;
}
