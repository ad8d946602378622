import * as z from "../../schemas/zod";

/**
 * The front door's HTTP as API Gateway's HTTP API hands it to a function (payload format 2.0),
 * reduced to what the routes read, and its answers. Errors are problem details (RFC 9457,
 * `application/problem+json`): a status, a stable `code` (also the metric's class), what was wrong
 * (`detail`) and, for a body that does not fit, every issue (`errors`).
 */

export interface HttpRequest {
  readonly method: string;
  /** The path as sent, e.g. `/v1/conversations/conv_1/messages`. */
  readonly path: string;
  /** Header names in lower case (as API Gateway gives them). */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The query's parameters (a repeated one's values joined by commas, as API Gateway gives them). */
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: string;
  readonly isBase64Encoded?: boolean;
  /** The verified token's claims (the JWT authorizer's); none on a route without one. */
  readonly claims?: Readonly<Record<string, unknown>>;
  /** The ARN of the AWS principal that signed the request (IAM authorization's); none else. */
  readonly principal?: string;
  /** API Gateway's request id, for the problem's `instance`. */
  readonly requestId: string;
}

export interface HttpResponse {
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** The problems the front door answers with, by code: the status each is sent with. */
export const PROBLEMS = {
  invalid_json: 400,
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  tenant_stopped: 403,
  not_found: 404,
  not_served: 404,
  method_not_allowed: 405,
  idempotency_key_reused: 409,
  version_taken: 409,
  client_seq_taken: 409,
  client_seq_ahead: 409,
  client_seq_stale: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_requests: 429,
  backlog: 429,
  internal: 500,
  unavailable: 503,
} as const;
export type ProblemCode = keyof typeof PROBLEMS;

export interface Problem {
  readonly code: ProblemCode;
  readonly detail: string;
  readonly errors?: readonly { readonly path: string; readonly message: string }[];
  readonly headers?: Readonly<Record<string, string>>;
}

export function json(statusCode: number, body: unknown, headers: Record<string, string> = {}) {
  return {
    statusCode,
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  } satisfies HttpResponse;
}

export function problemResponse(problem: Problem, requestId: string): HttpResponse {
  const status = PROBLEMS[problem.code];
  return {
    statusCode: status,
    headers: { "content-type": "application/problem+json", ...problem.headers },
    body: JSON.stringify({
      type: `https://agentbus.dev/problems/${problem.code}`,
      title: problem.code.replaceAll("_", " "),
      status,
      code: problem.code,
      detail: problem.detail,
      instance: requestId,
      ...(problem.errors ? { errors: problem.errors } : {}),
    }),
  };
}

/** A problem as a value a route can throw. */
export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.detail);
    this.name = "ProblemError";
  }
}

export function fail(
  code: ProblemCode,
  detail: string,
  extra: Omit<Problem, "code" | "detail"> = {},
): never {
  throw new ProblemError({ code, detail, ...extra });
}

/** Whether `path` has the segments of a route's `template` (`{name}`: any one segment but ""). */
export function pathMatches(template: string, path: string): boolean {
  const want = template.split("/");
  const got = path.split("/");
  return (
    want.length === got.length &&
    want.every((segment, i) => (segment.startsWith("{") ? got[i] !== "" : segment === got[i]))
  );
}

/**
 * The parameters of `path`, percent-decoded, when it matches a route's `template`, else
 * undefined; 400 when it matches but a parameter is not percent-encoded UTF-8 (`%ZZ`, `conv_%`).
 */
export function matchPath(template: string, path: string): Record<string, string> | undefined {
  if (!pathMatches(template, path)) return undefined;
  const got = path.split("/");
  const params: Record<string, string> = {};
  template.split("/").forEach((segment, i) => {
    if (!segment.startsWith("{")) return;
    const name = segment.slice(1, -1);
    const value = got[i] ?? "";
    try {
      params[name] = decodeURIComponent(value);
    } catch {
      fail("invalid_request", `${name} ${JSON.stringify(value)} is not percent-encoded UTF-8`);
    }
  });
  return params;
}

/** An event's headers with their names in lower case (as the routes read them). */
export function lowerCaseHeaders(
  headers: Readonly<Record<string, string | undefined>> | undefined,
): Record<string, string> {
  const lower: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {}))
    if (value !== undefined) lower[name.toLowerCase()] = value;
  return lower;
}

/** A header, case-insensitively. */
export function header(request: HttpRequest, name: string): string | undefined {
  return request.headers[name.toLowerCase()];
}

/** One issue line (`path: message`) as a problem's error. */
export function issue(line: string, root: string): { path: string; message: string } {
  const at = line.indexOf(": ");
  return at < 0
    ? { path: root, message: line }
    : { path: line.slice(0, at), message: line.slice(at + 2) };
}

/** The body as JSON of `schema`: 415, 413, 400 (not JSON), or 400 with every issue. */
export function bodyOf<T>(request: HttpRequest, schema: z.ZodMiniType<T>, maxBytes: number): T {
  const type = header(request, "content-type") ?? "";
  if (!/^application\/json\b/i.test(type))
    fail(
      "unsupported_media_type",
      `send the body as application/json (got ${type || "no content type"})`,
    );
  const text = request.isBase64Encoded
    ? Buffer.from(request.body ?? "", "base64").toString("utf8")
    : (request.body ?? "");
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > maxBytes)
    fail("payload_too_large", `the body is ${bytes} bytes; at most ${maxBytes} are taken`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    fail("invalid_json", `the body is not JSON: ${(error as Error).message}`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    fail("invalid_request", "the body does not fit", {
      errors: z.issueLines(parsed.error, "(body)").map((line) => issue(line, "(body)")),
    });
  return parsed.data;
}
