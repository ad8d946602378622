import { Sha256 } from "@smithy/core/checksum";
import { SignatureV4 } from "@smithy/signature-v4";
import { describe, expect, it } from "vitest";
import { verifySignature } from "../../lib/dev/local/sigv4";

/**
 * The local front door's check of a service's signed request (lib/dev/local/sigv4.ts), beside the
 * end-to-end test that signs with the SDK and with curl (test/e2e/front-door.test.ts).
 */

const CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };
const NOW = new Date("2026-12-02T12:00:00Z");

async function signed(options: { service?: string; at?: Date; body?: string } = {}) {
  const url = new URL("http://127.0.0.1:8631/v1/tenants/acme/conversations/conv_1?x=1");
  const body = options.body ?? "";
  const signer = new SignatureV4({
    service: options.service ?? "execute-api",
    region: "eu-west-1",
    sha256: Sha256,
    credentials: CREDENTIALS,
  });
  const request = await signer.sign(
    {
      method: "GET",
      protocol: "http:",
      hostname: url.hostname,
      port: 8631,
      path: url.pathname,
      query: { x: "1" },
      headers: { host: url.host },
      ...(body ? { body } : {}),
    },
    { signingDate: options.at ?? NOW },
  );
  const headers = Object.fromEntries(
    Object.entries(request.headers).map(([k, v]) => [k.toLowerCase(), String(v)]),
  );
  return { method: "GET", url, headers, body: Buffer.from(body) };
}

describe("a service's signature, checked locally as API Gateway's IAM authorization checks it", () => {
  it("takes a request signed by the credentials, in any Region, and names its signer", async () => {
    expect(await verifySignature(await signed(), CREDENTIALS, NOW)).toEqual({
      principal: "arn:aws:iam::000000000000:user/testing",
    });
  });

  it("refuses a signature for another service, one too old, and an altered query", async () => {
    const other = await verifySignature(await signed({ service: "lambda" }), CREDENTIALS, NOW);
    const old = await verifySignature(
      await signed({ at: new Date(NOW.getTime() - 16 * 60_000) }),
      CREDENTIALS,
      NOW,
    );
    const request = await signed();
    request.url.searchParams.set("x", "2");
    const altered = await verifySignature(request, CREDENTIALS, NOW);
    expect([other, old, altered]).toEqual([
      { problem: "the request is signed for lambda, not execute-api" },
      { problem: "Signature expired: the request's x-amz-date is not within 15 minutes" },
      { problem: "The request signature we calculated does not match the signature you provided" },
    ]);
  });
});
