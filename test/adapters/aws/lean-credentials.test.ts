import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { containerEndpoint } from "../../../functions/adapters/aws/lean/credentials";
import { type HttpRequestLike, LeanAwsClient } from "../../../functions/adapters/aws/lean-client";
import { GetItem } from "../../../functions/adapters/aws/operations";

/**
 * The lean client's credentials from a container credentials endpoint (Lambda SnapStart, ECS),
 * served here on 127.0.0.1: the authorization token or its file, refresh before expiry, one fetch
 * for concurrent calls, retries, and the refusals the SDK makes.
 */

interface Served {
  readonly url: string;
  readonly authorizations: (string | undefined)[];
  answers: { status: number; body: object | string }[];
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A credentials endpoint on 127.0.0.1 answering from `answers` in turn (the last one repeats). */
async function credentialsServer(answers: Served["answers"]): Promise<Served> {
  const served: Served = { url: "", authorizations: [], answers };
  const server = createServer((req, res) => {
    served.authorizations.push(req.headers.authorization);
    const answer =
      served.answers[Math.min(served.authorizations.length, served.answers.length) - 1];
    res.writeHead(answer?.status ?? 500, { "content-type": "application/json" });
    res.end(typeof answer?.body === "string" ? answer.body : JSON.stringify(answer?.body ?? {}));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(served, { url: `http://127.0.0.1:${port}/2021-04-23/credentials` });
}

const inMinutes = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString();
const role = (id: string, minutes = 60) => ({
  status: 200,
  body: {
    AccessKeyId: id,
    SecretAccessKey: "secret",
    Token: `token-${id}`,
    Expiration: inMinutes(minutes),
  },
});

/** A lean client with this environment whose AWS calls are recorded, not sent. */
function client(env: Record<string, string>) {
  const requests: HttpRequestLike[] = [];
  const lean = new LeanAwsClient({
    region: "eu-west-1",
    env,
    containerEndpoint: { retryDelayMs: 5 },
    http: {
      async handle(request) {
        requests.push(request);
        return {
          response: { statusCode: 200, headers: {}, body: Readable.from([Buffer.from("{}")]) },
        };
      },
    },
  });
  const signedBy = (i: number) => ({
    key: /Credential=([^/]+)\//.exec(requests[i]?.headers.authorization ?? "")?.[1],
    token: requests[i]?.headers["x-amz-security-token"],
  });
  return { lean, requests, signedBy };
}

const get = GetItem({ TableName: "t", Key: {} });

describe("credentials from the container endpoint", () => {
  it("signs with the endpoint's credentials, sending the authorization token (SnapStart)", async () => {
    const served = await credentialsServer([role("AKSNAP")]);
    const { lean, signedBy } = client({
      AWS_CONTAINER_CREDENTIALS_FULL_URI: served.url,
      AWS_CONTAINER_AUTHORIZATION_TOKEN: "the-token",
    });
    await lean.send(get);
    await lean.send(get);
    expect(signedBy(0)).toEqual({ key: "AKSNAP", token: "token-AKSNAP" });
    expect(signedBy(1)).toEqual({ key: "AKSNAP", token: "token-AKSNAP" });
    expect(served.authorizations).toEqual(["the-token"]);
  });

  it("reads the token from its file, which wins over the variable", async () => {
    const served = await credentialsServer([role("AKFILE")]);
    const file = join(mkdtempSync(join(tmpdir(), "agentbus-token-")), "token");
    writeFileSync(file, "from-the-file\n");
    const { lean, signedBy } = client({
      AWS_CONTAINER_CREDENTIALS_FULL_URI: served.url,
      AWS_CONTAINER_AUTHORIZATION_TOKEN: "from-the-variable",
      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: file,
    });
    await lean.send(get);
    expect(served.authorizations).toEqual(["from-the-file"]);
    expect(signedBy(0).key).toBe("AKFILE");
  });

  it("fetches again before the credentials expire, once for calls made together", async () => {
    const served = await credentialsServer([role("AKOLD", 4), role("AKNEW", 60)]);
    const { lean, signedBy } = client({ AWS_CONTAINER_CREDENTIALS_FULL_URI: served.url });
    await Promise.all([lean.send(get), lean.send(get)]);
    expect(served.authorizations).toHaveLength(1);
    expect([signedBy(0).key, signedBy(1).key]).toEqual(["AKOLD", "AKOLD"]);
    // Four minutes left is inside the five before expiry: the next call fetches fresh ones.
    await lean.send(get);
    await lean.send(get);
    expect(served.authorizations).toHaveLength(2);
    expect([signedBy(2).key, signedBy(3).key]).toEqual(["AKNEW", "AKNEW"]);
  });

  it("prefers the environment's keys, and retries a failed fetch", async () => {
    const served = await credentialsServer([{ status: 500, body: "" }, role("AKRETRY")]);
    const withKeys = client({
      AWS_ACCESS_KEY_ID: "AKENV",
      AWS_SECRET_ACCESS_KEY: "s",
      AWS_CONTAINER_CREDENTIALS_FULL_URI: served.url,
    });
    await withKeys.lean.send(get);
    expect(withKeys.signedBy(0).key).toBe("AKENV");
    expect(served.authorizations).toHaveLength(0);
    const retried = client({ AWS_CONTAINER_CREDENTIALS_FULL_URI: served.url });
    await retried.lean.send(get);
    expect(retried.signedBy(0).key).toBe("AKRETRY");
    expect(served.authorizations).toHaveLength(2);
  });

  it("says why when the endpoint refuses or answers nonsense, and sends nothing", async () => {
    const refused = await credentialsServer([
      { status: 403, body: { Code: "AccessDenied", Message: "bad token" } },
    ]);
    const denied = client({ AWS_CONTAINER_CREDENTIALS_FULL_URI: refused.url });
    await expect(denied.lean.send(get)).rejects.toThrow(
      /container endpoint http:\/\/127\.0\.0\.1:\d+\/2021-04-23\/credentials: the endpoint answered 403 \(AccessDenied: bad token\)/,
    );
    expect(refused.authorizations).toHaveLength(4);
    expect(denied.requests).toHaveLength(0);
    const garbled = await credentialsServer([{ status: 200, body: { AccessKeyId: "AK" } }]);
    const partial = client({ AWS_CONTAINER_CREDENTIALS_FULL_URI: garbled.url });
    await expect(partial.lean.send(get)).rejects.toThrow(
      /is not \{ AccessKeyId, SecretAccessKey, Token, Expiration/,
    );
  });

  it("refuses an http endpoint that is neither loopback nor a container host, without contacting it", () => {
    const at = (url: string) => () =>
      containerEndpoint({ AWS_CONTAINER_CREDENTIALS_FULL_URI: url });
    expect(at("http://198.51.100.7/creds")).toThrow(/must be https, or http on a loopback address/);
    expect(at("http://127.0.0.1.example.com/creds")).toThrow(/must be https/);
    expect(at("http://127.0.0.300/creds")).toThrow(/"http:\/\/127.0.0.300\/creds" is not a URL/);
    expect(at("https://creds.example.com/x")().href).toBe("https://creds.example.com/x");
    expect(at("http://localhost:9001/x")().host).toBe("localhost:9001");
    expect(at("http://[::1]:9001/x")().hostname).toBe("[::1]");
    const ecs = containerEndpoint({
      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: "/v2/credentials/abc",
    });
    expect(ecs.href).toBe("http://169.254.170.2/v2/credentials/abc");
  });
});
