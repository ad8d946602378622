import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { callerPrincipal, getCallerIdentity, principalOf } from "../../lib/operator/caller";
import { emulator } from "../support/aws";

/**
 * Who the operator's tools act as (lib/operator/caller.ts): STS GetCallerIdentity, answered by
 * the emulator, and by a stand-in STS on 127.0.0.1 that counts what it is asked, so that asking
 * again in the same process is seen to send nothing.
 */

const ARN = "arn:aws:sts::123456789012:assumed-role/ops-admin/anna";
const ANSWER = `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <GetCallerIdentityResult><Arn>${ARN}</Arn><UserId>AROAEXAMPLE:anna</UserId><Account>123456789012</Account></GetCallerIdentityResult>
  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>
</GetCallerIdentityResponse>`;
const REFUSAL = `<ErrorResponse><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code><Message>The security token included in the request is invalid.</Message></Error></ErrorResponse>`;

const asked: { url: string; headers: IncomingHttpHeaders; body: string }[] = [];
let sts: Server;
let endpoint: string;

beforeAll(async () => {
  sts = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      asked.push({ url: request.url ?? "", headers: request.headers, body });
      const refused = request.headers.authorization?.includes("Credential=refused/");
      response
        .writeHead(refused ? 403 : 200, { "content-type": "text/xml" })
        .end(refused ? REFUSAL : ANSWER);
    });
  });
  await new Promise<void>((resolve) => sts.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(sts.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => sts.close(() => resolve())));

const config = (accessKeyId: string) => ({
  endpoint,
  region: "eu-west-1",
  credentials: { accessKeyId, secretAccessKey: "secret" },
});

describe("the AWS principal the operator's tools act as", () => {
  it("is the ARN the emulator's STS answers for the credentials", async () => {
    expect(await getCallerIdentity(emulator())).toMatch(/^arn:aws:(sts|iam)::\d{12}:\S+$/);
  });

  it("is asked of STS once per process, with a signed GetCallerIdentity", async () => {
    const before = asked.length;
    const answers = await Promise.all([
      callerPrincipal(config("ops")),
      callerPrincipal(config("ops")),
    ]);
    expect(await callerPrincipal(config("ops"))).toBe(ARN);
    expect(answers).toEqual([ARN, ARN]);
    const calls = asked.slice(before);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.body).toBe("Action=GetCallerIdentity&Version=2011-06-15");
    expect(calls[0]?.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=ops\/\d{8}\/eu-west-1\/sts\/aws4_request/,
    );
  });

  it("is left out, with one warning, when STS refuses the credentials", async () => {
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    try {
      expect(await callerPrincipal(config("refused"))).toBeUndefined();
      expect(await callerPrincipal(config("refused"))).toBeUndefined();
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toContain("InvalidClientTokenId");
    } finally {
      warn.mockRestore();
    }
  });

  it("is taken from STS's answer only when it is an ARN", () => {
    expect(principalOf(ARN)).toBe(ARN);
    expect(() => principalOf(undefined)).toThrow(/names no ARN/);
    expect(() => principalOf("not an arn")).toThrow(/names no ARN/);
  });
});
