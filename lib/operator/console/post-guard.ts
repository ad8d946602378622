import { randomBytes, timingSafeEqual } from "node:crypto";

/**
 * What a POST to the console must show before it may act: that it was sent to the console's own
 * address (Host, and Origin when the browser sends one), and the console's form token (a random
 * value made when the console starts and written into every form it serves), so that another web
 * page open in the same browser cannot make it act.
 */

/** A fresh form token: 32 random bytes, base64url. */
export function newFormToken(): string {
  return randomBytes(32).toString("base64url");
}

/** Whether `given` is the console's token (compared in constant time). */
export function tokenMatches(expected: string, given: string | null | undefined): boolean {
  if (typeof given !== "string" || given.length === 0) return false;
  const a = Buffer.from(expected, "utf8");
  const b = Buffer.from(given, "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Why a POST is not addressed to the console at `own` (`127.0.0.1:<port>`), undefined when it
 * is: its Host must be exactly that, and its Origin, when sent, `http://` + that.
 */
export function postAddressProblem(
  own: string,
  headers: { readonly host?: string; readonly origin?: string },
): string | undefined {
  const host = headers.host?.toLowerCase();
  if (host !== own)
    return `this console acts only on requests to ${own} (Host was ${headers.host ?? "missing"})`;
  const origin = headers.origin;
  if (origin !== undefined && origin.toLowerCase() !== `http://${own}`)
    return `this console acts only on forms of its own pages at http://${own} (Origin was ${origin})`;
  return undefined;
}
