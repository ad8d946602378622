import { errors, type JWTVerifyGetKey, jwtVerify } from "jose";

/**
 * A bearer token checked as an HTTP API's JWT authorizer checks it (the stream function, whose URL
 * has no authorizer, and the local server, which plays API Gateway): signed with an RSA key of the
 * issuer (API Gateway takes no other), `iss`, the audience, `exp` (required: an access token has
 * one, RFC 9068 §2.2) and `nbf`. The audience is `aud`, or `client_id` in a token without `aud`
 * (API Gateway's rule: a Cognito access token names its app client so), one of those expected.
 */

/** The signature algorithms an HTTP API's JWT authorizer takes: RSA only. */
export const TOKEN_ALGORITHMS = ["RS256", "RS384", "RS512"];

/** The token's claims, or what is wrong with it (for `www-authenticate`). */
export async function verifyToken(
  token: string,
  key: JWTVerifyGetKey,
  expected: { readonly issuer: string; readonly audience: string | string[] },
): Promise<{ claims: Record<string, unknown> } | { problem: string }> {
  try {
    const { payload } = await jwtVerify(token, key, {
      issuer: expected.issuer,
      algorithms: TOKEN_ALGORITHMS,
      requiredClaims: ["exp"],
    });
    const problem = audienceProblem(payload, expected.audience);
    return problem ? { problem } : { claims: payload as Record<string, unknown> };
  } catch (error) {
    if (error instanceof errors.JWTExpired) return { problem: "the token has expired" };
    if (error instanceof errors.JWTClaimValidationFailed)
      return {
        problem:
          error.reason === "missing"
            ? `the token has no ${error.claim} claim`
            : `the token's ${error.claim} claim is not accepted`,
      };
    return { problem: "the token is not signed by the issuer" };
  }
}

/**
 * Why the token is not for one of the `expected` audiences (undefined: it is): its `aud` (a
 * string or a list) names one, or, without `aud`, its `client_id` is one.
 */
function audienceProblem(
  claims: Record<string, unknown>,
  expected: string | string[],
): string | undefined {
  const accepted = new Set(typeof expected === "string" ? [expected] : expected);
  const { aud, client_id: clientId } = claims;
  if (aud === undefined) {
    if (clientId === undefined) return "the token has no aud claim";
    return typeof clientId === "string" && accepted.has(clientId)
      ? undefined
      : "the token's client_id claim is not accepted";
  }
  const named = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : [];
  return named.some((a) => typeof a === "string" && accepted.has(a))
    ? undefined
    : "the token's aud claim is not accepted";
}
