import { letterDigest, opaqueIdProblem, TENANT_ID_PATTERN } from "../../schemas";
import { fail } from "./http";

/**
 * Who calls: the tenant and the user, from the verified token's claims (the JWT authorizer in
 * front of the function checked the signature, issuer, audience and expiry), never from a body.
 *
 * - `tenant_id`: the claim named by the deployment (`TENANT_CLAIM`, default `tenant_id`; an
 *   issuer that cannot add one maps it, e.g. `custom:tenant_id` in Cognito), a slug
 *   (schemas/ids.ts). A token without it is refused (403): there is no default tenant at the door.
 * - `user_id`: `user_<sub>` when the token's subject is already an id of letters, digits and `-`
 *   (a Cognito or UUID subject), else `user_` + 26 letters of its SHA-256 (an `auth0|...` subject),
 *   so the same person is the same id and no subject's text, which may be personal, travels.
 * - whether it is a service's: a token whose `scope` (space-separated, RFC 9068 §2.2.3) holds the
 *   scope the deployment names (`SERVICE_SCOPE`, none by default), or a request signed with AWS
 *   credentials. Only a service speaks for a customer it names; a user is their own customer.
 */

export interface Caller {
  readonly tenantId: string;
  /** The person acting (a client's user); none when a service calls. */
  readonly userId?: string;
  /**
   * The service acting, when a service calls (the signer's ARN, or the user id of a token with
   * the service scope): it may name the customer a message is from.
   */
  readonly service?: string;
}

export const DEFAULT_TENANT_CLAIM = "tenant_id";

export function callerOf(
  claims: Readonly<Record<string, unknown>> | undefined,
  tenantClaim = DEFAULT_TENANT_CLAIM,
  serviceScope?: string,
): Caller {
  if (!claims) fail("unauthorized", "no verified token: send Authorization: Bearer <token>");
  const tenant = claims[tenantClaim];
  if (typeof tenant !== "string" || !TENANT_ID_PATTERN.test(tenant))
    fail(
      "forbidden",
      `the token has no tenant: its ${tenantClaim} claim must be 1-63 of a-z 0-9 - (got ${tenant === undefined ? "none" : JSON.stringify(tenant)})`,
    );
  const sub = claims.sub;
  if (typeof sub !== "string" || sub === "")
    fail("forbidden", "the token has no subject (sub claim)");
  const userId = userIdOf(sub);
  const scopes = typeof claims.scope === "string" ? claims.scope.split(/\s+/) : [];
  const service = Boolean(serviceScope) && scopes.includes(serviceScope ?? "");
  return { tenantId: tenant, userId, ...(service ? { service: userId } : {}) };
}

/** The customer a user is: `cust_<user token>`. */
export function ownCustomerOf(userId: string): string {
  return `cust_${userId.slice("user_".length)}`;
}

/** The `user_<token>` id of a token's subject (see above). */
export function userIdOf(sub: string): string {
  const direct = `user_${sub}`;
  if (opaqueIdProblem(direct) === undefined) return direct;
  return `user_${letterDigest(sub, 26)}`;
}

/**
 * A service that signed its request with AWS credentials (API Gateway's IAM authorization checked
 * the signature and that its policy allows the path): the tenant is the path's, which the policy
 * may limit (`.../v1/tenants/acme/*`); no user acts. `principal` is the caller's ARN.
 */
export function serviceCallerOf(tenant: string | undefined, principal: string | undefined): Caller {
  if (!principal) fail("unauthorized", "no verified AWS signature: sign the request (SigV4)");
  if (tenant === undefined || !TENANT_ID_PATTERN.test(tenant))
    fail(
      "invalid_request",
      `tenant ${JSON.stringify(tenant ?? "")} in the path must be 1-63 of a-z 0-9 - starting with a letter or digit`,
    );
  return { tenantId: tenant, service: principal };
}
