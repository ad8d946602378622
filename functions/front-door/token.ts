import { errors, type JWTVerifyGetKey, jwtVerify } from "jose";

/**
 * A bearer token checked as an HTTP API's JWT authorizer checks it (the stream function, whose URL
 * has no authorizer, and the local server, which plays API Gateway): signed with an RSA key of the
 * issuer (API Gateway takes no other), `iss`, `aud`, `exp` (required: an access token has one, RFC
 * 9068 §2.2) and `nbf`.
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
      audience: expected.audience,
      algorithms: TOKEN_ALGORITHMS,
      requiredClaims: ["exp"],
    });
    return { claims: payload as Record<string, unknown> };
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
