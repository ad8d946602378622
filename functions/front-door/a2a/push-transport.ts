import { lookup as systemLookup } from "node:dns/promises";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { isPrivateAddress } from "./push-configs";

/**
 * How a push notification reaches its webhook: a POST over a connection to the address that was
 * checked. The host's name is resolved once per connection, by the `lookup` the socket is given
 * (`checkedLookup`): every address it resolves to is checked (a deployed stack refuses a name
 * with any loopback, private, link-local or shared address), and those checked are the ones the
 * socket connects to. A name whose answer changes between a check and a connection (DNS
 * rebinding) cannot reach the network: there is no second resolution. TLS's server name and the
 * `Host` header stay the URL's name. A literal address is never resolved (the URL's check,
 * ./push-configs.ts `pushUrlProblem`, has refused an inward one).
 */

/** The addresses a host name resolves to (the system's resolver, or a test's). */
export type ResolveHost = (host: string) => Promise<string[]>;

/** A POST of one notification; `lookup` is what the connection's socket resolves its host with. */
export interface PushRequest {
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly timeoutMs: number;
  readonly lookup: LookupFunction;
}

/** A destination refused where its name resolves: a retry would be refused the same. */
export class PushDestinationRefused extends Error {
  override readonly name = "PushDestinationRefused";
}

/** The system's resolver: every address of the name. */
export async function resolveHost(host: string): Promise<string[]> {
  return (await systemLookup(host, { all: true })).map((a) => a.address);
}

/**
 * A socket's `lookup` that resolves the name once with `resolve` and hands the socket the
 * addresses it checked; with any inward address among them (and no local allowance), it fails
 * with PushDestinationRefused and nothing is connected to.
 */
export function checkedLookup(resolve: ResolveHost, allowLoopback: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const host = hostname.replace(/^\[|\]$/g, "");
    resolve(host).then(
      (addresses) => {
        const inward = allowLoopback ? [] : addresses.filter(isPrivateAddress);
        if (addresses.length === 0)
          return callback(new PushDestinationRefused(`${host} resolves to no address`), "", 4);
        if (inward.length > 0)
          return callback(
            new PushDestinationRefused(
              `the push notification URL's host ${host} resolves to ${inward.join(", ")}, inside the network`,
            ),
            "",
            4,
          );
        const checked = addresses.map((address) => ({ address, family: isIP(address) || 4 }));
        if (options.all) return callback(null, checked);
        const [first] = checked;
        return first && callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, "", 4),
    );
  };
}

/**
 * POST over node:http or node:https (by the URL's scheme), the socket's address from
 * `init.lookup`; a redirect is never followed (its status is the answer). The answer's status;
 * throws when no whole answer came within `timeoutMs`.
 */
export function httpPost(url: string, init: PushRequest): Promise<number> {
  const send = new URL(url).protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const request = send(url, {
      method: "POST",
      headers: { ...init.headers, "content-length": String(Buffer.byteLength(init.body)) },
      lookup: init.lookup,
      signal: AbortSignal.timeout(init.timeoutMs),
    });
    request.on("response", (response) => {
      response.on("error", reject);
      response.on("end", () => resolve(response.statusCode ?? 0));
      response.resume();
    });
    request.on("error", reject);
    request.end(init.body);
  });
}
