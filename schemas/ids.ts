import { createHash } from "node:crypto";
import * as z from "./zod";

/**
 * Identifier rules.
 *
 * `event_id` is a bare ULID (26 Crockford base32 characters): unique, sortable by creation time,
 * and meaningless outside the system.
 *
 * Every other identifier that travels in an envelope (correlation, task, conversation, aggregate)
 * is *opaque*: `<prefix>_<body>`, where the prefix names the kind (`task`, `corr`, `conv`, ...)
 * and the body is either a ULID or a short token of letters, digits and `-`. Identifiers end up
 * in logs, metrics dimensions, queue group ids and table keys, so they must never carry personal
 * data. The checked part of that rule: no `@` (e-mail addresses), no whitespace, no `+`, and no
 * run of seven or more digits (phone, card and national-id numbers) unless the body is a ULID.
 * `correlation_id = user_138_phone_13800138000` is rejected; `corr_01JABCDEF...` is accepted.
 */
export const ULID_PATTERN = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const OPAQUE_PATTERN = /^[a-z][a-z0-9]{0,15}_[A-Za-z0-9-]{1,64}$/;
const LONG_DIGIT_RUN = /[0-9]{7,}/;

export const Ulid = z
  .string()
  .check(z.regex(ULID_PATTERN, { message: "must be a ULID (26 Crockford base32 characters)" }));

export function opaqueIdProblem(value: string): string | undefined {
  if (!OPAQUE_PATTERN.test(value)) {
    return "must be an opaque id: <prefix>_<token>, prefix a-z0-9 (max 16), token A-Za-z0-9- (max 64)";
  }
  const body = value.slice(value.indexOf("_") + 1);
  if (!ULID_PATTERN.test(body) && LONG_DIGIT_RUN.test(body)) {
    return "looks like it carries personal data (7 or more digits in a row); use a ULID-based id";
  }
  return undefined;
}

/**
 * `count` letters a-p from a SHA-256 of `key` (at most 64): a stable token for an opaque id that
 * cannot look like personal data, which a run of seven digits would.
 */
export function letterDigest(key: string, count: number): string {
  const hex = createHash("sha256").update(key).digest("hex").slice(0, count);
  return [...hex].map((c) => String.fromCharCode(97 + Number.parseInt(c, 16))).join("");
}

export const OpaqueId = z.string().check(
  z.regex(OPAQUE_PATTERN, {
    message:
      "must be an opaque id: <prefix>_<token>, prefix a-z0-9 (max 16), token A-Za-z0-9- (max 64)",
  }),
  z.refine(
    (value) =>
      !LONG_DIGIT_RUN.test(value) ||
      !OPAQUE_PATTERN.test(value) ||
      opaqueIdProblem(value) === undefined,
    {
      message:
        "looks like it carries personal data (7 or more digits in a row); use a ULID-based id",
    },
  ),
);

/**
 * A tenant: the organisation a task belongs to (seed 000 §1.1 `tenant_id`), a lower-case slug of
 * 1-63 letters, digits and `-` (e.g. `acme`), taken from the caller's token, never from a body.
 */
export const TENANT_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const TenantId = z.string().check(
  z.regex(TENANT_ID_PATTERN, {
    message: "must be 1-63 of a-z 0-9 - starting with a letter or digit",
  }),
);

/** The tenant of what carries none: events stored before envelopes carried a tenant, the CLI's. */
export const DEFAULT_TENANT = "default";

/** The tenant an envelope belongs to, or a state that records its tenant as envelopes do. */
export function tenantOf(envelope: { readonly tenant_id?: string }): string {
  return envelope.tenant_id ?? DEFAULT_TENANT;
}

export const EventTypeName = z.string().check(
  z.regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/, {
    message: "must be dotted lower-case words, e.g. reply.generation.requested",
  }),
  z.maxLength(128),
);

/**
 * The conversation a tenant's client means by `clientId` (the id in its URLs): tenants choose
 * their conversation ids, so the conversation is keyed by both, as `conv_` + 26 letters of a
 * hash of the tenant and the id; two tenants' `conv_1` are two conversations, with state keys and
 * order keys of their own. The default tenant's ids are kept as they are (the AWS CLI's and the
 * events' from before tenants).
 */
export function tenantConversationId(tenant: string, clientId: string): string {
  return tenant === DEFAULT_TENANT ? clientId : `conv_${letterDigest(`${tenant}/${clientId}`, 26)}`;
}
