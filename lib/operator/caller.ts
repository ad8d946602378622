import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SignatureV4 } from "@smithy/signature-v4";
import { PrincipalArn } from "../../schemas/events/operator";
import type { ClientConfig } from "./stack";

/**
 * Who the operator's tools act as on AWS: the ARN STS `GetCallerIdentity` answers for the
 * credentials of a client configuration, the `principal` of every record the CLI and the console
 * put on the audit topic (./audit.ts). Asked once per process for each configuration (endpoint,
 * region, access key), not once per action. When it cannot be read (no credentials, STS out of
 * reach), the records go without it, and the process is warned once.
 *
 * The AWS SDK for JavaScript's STS client is not among this package's dependencies, so the one
 * call is made as the SDK would make it: STS's query protocol (`POST /`,
 * `Action=GetCallerIdentity&Version=2011-06-15`), signed with the SDK's signer (`sts`) and sent
 * with the credentials, region, hash and HTTP handler an EventBridge client of the same
 * configuration lends, as functions/adapters/aws/eventbridge-v2.ts does. It goes to the
 * configuration's endpoint when it names one (the local stack's: moto answers it), else to the
 * Region's STS endpoint. `@aws-sdk/client-sts`'s GetCallerIdentityCommand replaces it when that
 * package is added.
 */

const identities = new Map<string, Promise<string | undefined>>();

/** The ARN the credentials of `config` act as (asked once per process), undefined if unknown. */
export function callerPrincipal(config: ClientConfig): Promise<string | undefined> {
  const key = [config.endpoint ?? "", config.region, config.credentials?.accessKeyId ?? ""].join(
    "\u0000",
  );
  let known = identities.get(key);
  if (!known) {
    known = getCallerIdentity(config).catch((error: unknown) => {
      process.emitWarning(
        `audit records name no AWS principal: STS GetCallerIdentity failed (${error instanceof Error ? error.message : String(error)})`,
      );
      return undefined;
    });
    identities.set(key, known);
  }
  return known;
}

const QUERY = "Action=GetCallerIdentity&Version=2011-06-15";

/** One STS GetCallerIdentity call (see top): the caller's ARN. */
export async function getCallerIdentity(config: ClientConfig): Promise<string> {
  const lender = new EventBridgeClient(config);
  try {
    const region = await lender.config.region();
    const url = config.endpoint ? new URL(config.endpoint) : await stsEndpoint(lender, region);
    const request = {
      method: "POST",
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname || "/",
      query: {},
      headers: {
        host: url.host,
        "content-type": "application/x-www-form-urlencoded; charset=utf-8",
      },
      body: QUERY,
    };
    const signer = new SignatureV4({
      service: "sts",
      region,
      sha256: lender.config.sha256,
      credentials: lender.config.credentials,
    });
    const signed = await signer.sign(request);
    const { response } = await lender.config.requestHandler.handle(signed as never);
    return principalOf(response.statusCode, await textOf(response.body));
  } finally {
    lender.destroy();
  }
}

/** The ARN of a GetCallerIdentity answer; an error naming STS's code when it refused. */
export function principalOf(status: number, xml: string): string {
  const element = (name: string) =>
    new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1]?.replace(/&amp;/g, "&");
  if (status !== 200)
    throw new Error(
      `STS answered HTTP ${status}${element("Code") ? ` ${element("Code")}: ${element("Message") ?? ""}` : ""}`.trim(),
    );
  const arn = element("Arn");
  const parsed = PrincipalArn.safeParse(arn);
  if (!parsed.success) throw new Error(`STS's answer names no ARN: ${xml.slice(0, 200)}`);
  return parsed.data;
}

/** STS's endpoint in `region`: the partition's DNS suffix, from EventBridge's endpoint rules. */
async function stsEndpoint(lender: EventBridgeClient, region: string): Promise<URL> {
  const { hostname } = lender.config.endpointProvider({ Region: region }).url;
  const at = hostname.indexOf(`.${region}.`);
  const suffix = at < 0 ? "amazonaws.com" : hostname.slice(at + region.length + 2);
  return new URL(`https://sts.${region}.${suffix}/`);
}

async function textOf(body: unknown): Promise<string> {
  if (typeof body === "string") return body;
  const chunks: Buffer[] = [];
  for await (const chunk of body as AsyncIterable<Uint8Array | string>)
    chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk));
  return Buffer.concat(chunks).toString("utf8");
}
