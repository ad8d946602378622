import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type {
  APIGatewayProxyEventV2WithJWTAuthorizer,
  APIGatewayProxyStructuredResultV2,
} from "aws-lambda";
import { type CryptoKey, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { ulid } from "ulid";
import { isA2aPath } from "../../../functions/front-door/a2a/serve";
import { methodsOf, ROUTES, type Route } from "../../../functions/front-door/api";
import { pathMatches } from "../../../functions/front-door/http";
import { STREAM_ROUTES } from "../../../functions/front-door/stream";
import { verifyToken } from "../../../functions/front-door/token";
import type { FrontDoorStreamHandler } from "../../../functions/handlers/front-door-stream";
import { loggableMessage } from "../../../functions/handlers/log-redaction";
import { verifySignature } from "./sigv4";

/**
 * The front door served locally as API Gateway serves it: an HTTP server on 127.0.0.1 that does
 * what the HTTP API and its JWT authorizer do before the function runs, then runs the stack's
 * front-door function in-process with the same payload (format 2.0).
 *
 * - A local issuer (`LOCAL_ISSUER`) with an RS256 key pair made at start (with `jose`; an HTTP
 *   API's JWT authorizer takes RSA signatures only) signs development tokens (`token(...)`); the
 *   server verifies a route's bearer token as the JWT authorizer does
 *   (functions/front-door/token.ts): signature, `iss`, `aud`, `exp` (required) and `nbf`. A
 *   missing or invalid token is API Gateway's answer: 401, `{"message":"Unauthorized"}`, and a
 *   `www-authenticate` header that names the problem (`error_description`), as API Gateway
 *   writes it.
 * - The routes of the function's route table are served with their authorization (the stack's
 *   routes are made from the same table; a GET route takes HEAD too); any other request goes to
 *   the function with none, as the stack's `$default` route sends it, and the function answers
 *   404, or 405 with `Allow`.
 * - A service route (`/v1/tenants/{tenant_id}/...`) takes a request signed (SigV4, service
 *   `execute-api`) with the emulator's credentials (`LOCAL_SERVICE_CREDENTIALS`), checked as
 *   API Gateway's IAM authorization checks it (./sigv4.ts); else its 403.
 * - A body over API Gateway's 10 MB payload limit is its 413.
 * - The stream routes (functions/front-door/stream.ts), which a deployed stack serves from the
 *   stream function's URL, are served here on the same port: a request on their paths (any
 *   method) goes to the stream function as a function URL's payload, unverified (the function
 *   verifies the token, as behind its URL), and what it writes is streamed to the client as it
 *   comes.
 * - No request stops the server: one that fails is API Gateway's 500
 *   `{"message":"Internal Server Error"}`, logged.
 * - An idle connection stays open until its client closes it (or the server stops): the server
 *   never closes one under a request the client is sending.
 */

export const LOCAL_ISSUER = "https://agentbus.local/issuer";
export const LOCAL_AUDIENCE = "agentbus-local";
/** The credentials a service signs the service routes' requests with, locally (the emulator's). */
export const LOCAL_SERVICE_CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };
/**
 * The development token's claims (npm start prints it): tenant `local`, user `alice`, so its
 * customer is `cust_alice`, whose sample orders (./orders.ts) hold the order 123 the README's
 * HTTP example asks about.
 */
export const DEV_TOKEN_CLAIMS = { tenant_id: "local", sub: "alice" } as const;
const MAX_PAYLOAD_BYTES = 10 * 1024 * 1024;
/** The local issuer's signatures: RSA, as an HTTP API's JWT authorizer takes. */
const ALGORITHM = "RS256";

type Invoke = (
  event: APIGatewayProxyEventV2WithJWTAuthorizer,
) => Promise<APIGatewayProxyStructuredResultV2>;

export interface LocalIssuer {
  readonly issuer: string;
  readonly audience: string;
  /**
   * A development token for a tenant's user (or, with the deployment's service scope in `scope`, a
   * service), valid for `seconds` (default an hour).
   */
  token(
    claims: { tenant_id?: string; sub: string; scope?: string },
    seconds?: number,
  ): Promise<string>;
  /** A token of exactly `claims`, signed by the issuer's key (no `iss`, `aud` or `exp` unless given). */
  sign(claims: JWTPayload): Promise<string>;
  readonly publicKey: CryptoKey;
  /** The public key as a JWKS, as an OIDC issuer publishes it. */
  jwks(): Promise<{ keys: Record<string, unknown>[] }>;
}

export async function localIssuer(): Promise<LocalIssuer> {
  const { publicKey, privateKey } = await generateKeyPair(ALGORITHM);
  const kid = `local-${ulid()}`;
  const sign = (claims: JWTPayload) =>
    new SignJWT(claims).setProtectedHeader({ alg: ALGORITHM, kid }).sign(privateKey);
  return {
    issuer: LOCAL_ISSUER,
    audience: LOCAL_AUDIENCE,
    publicKey,
    token: (claims, seconds = 3600) => {
      const now = Math.floor(Date.now() / 1000);
      return sign({
        ...claims,
        iss: LOCAL_ISSUER,
        aud: LOCAL_AUDIENCE,
        iat: now,
        exp: now + seconds,
      });
    },
    sign,
    jwks: async () => ({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: ALGORITHM }] }),
  };
}

export interface LocalFrontDoor {
  /** `http://127.0.0.1:<port>/v1` */
  readonly url: string;
  readonly issuer: LocalIssuer;
  stop(): Promise<void>;
}

export interface FrontDoorFunctions {
  readonly invoke: Invoke;
  /** The stream function, when the stack has one. */
  readonly stream?: FrontDoorStreamHandler;
  /** The issuer whose tokens are taken (a new one when none is given). */
  readonly issuer?: LocalIssuer;
  /** 0 or none: a free port. */
  readonly port?: number | undefined;
}

/** Serve the front-door functions on 127.0.0.1. */
export async function serveFrontDoor(functions: FrontDoorFunctions): Promise<LocalFrontDoor> {
  const issuer = functions.issuer ?? (await localIssuer());
  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    // The request target as sent (`//` is a path here, not a host).
    const url = new URL(`http://127.0.0.1${req.url ?? "/"}`);
    const isStream =
      STREAM_ROUTES.some((r) => pathMatches(r.path, url.pathname)) || isA2aPath(url.pathname);
    return isStream && functions.stream
      ? streamAnswer(req, res, url, functions.stream)
      : answer(req, res, url, functions.invoke, issuer);
  };
  const server: Server = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      if (res.headersSent) res.end();
      else send(res, 500, { message: "Internal Server Error" });
      // As the functions' logs: what an error quotes of a request stays out (log-redaction).
      console.error("front door:", loggableMessage(String(error)));
    });
  });
  // An idle connection is the client's to close: a server that closes one after its keep-alive
  // timeout (Node's default, 5 s) can do so as the client sends its next request on it, which the
  // client sees reset (ECONNRESET, the request lost) when the process is busy enough for the two
  // timers to cross; `stop` closes the connections still open.
  server.keepAliveTimeout = 0;
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(functions.port ?? 0, "127.0.0.1", done);
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}/v1`,
    issuer,
    stop: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/**
 * A request to the HTTP API: the route that takes it (its method and path) and its authorization,
 * else the `$default` route's, which has none; then the function.
 */
async function answer(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  invoke: Invoke,
  issuer: LocalIssuer,
): Promise<void> {
  const method = req.method ?? "GET";
  const route: Route | undefined = ROUTES.find(
    (r) => methodsOf(r).includes(method) && pathMatches(r.path, url.pathname),
  );
  const body = await readBody(req);
  if (body === undefined) return send(res, 413, { message: "Request Entity Too Large" });
  const caller = await callerOf(req, url, body, route?.auth ?? "none", issuer);
  if ("status" in caller)
    return send(res, caller.status, { message: caller.message }, caller.headers);
  const requestId = ulid();
  const routeKey = route ? `${method} ${route.path}` : "$default";
  const event = eventOf(req, url, routeKey, body, caller, requestId);
  const result = await invoke(event);
  res.writeHead(result.statusCode ?? 200, {
    ...(result.headers as Record<string, string> | undefined),
    "apigw-requestid": requestId,
  });
  res.end(result.body ?? "");
}

/** A stream route: the stream function writes the response, streamed to the client as it comes. */
async function streamAnswer(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  stream: FrontDoorStreamHandler,
): Promise<void> {
  const requestId = ulid();
  const body = (await readBody(req)) ?? Buffer.alloc(0);
  const event = eventOf(req, url, "$default", body, {}, requestId);
  // Served over plain HTTP here: what the A2A cards name (functions/front-door/a2a/serve.ts).
  event.headers["x-forwarded-proto"] = "http";
  let gone = false;
  res.on("close", () => {
    gone = true;
  });
  await stream(event as never, (statusCode, headers) => {
    res.writeHead(statusCode, { ...headers, "x-amzn-requestid": requestId });
    res.flushHeaders();
    return {
      write: (text) => res.write(text),
      end: () => res.end(),
      closed: () => gone,
    };
  });
}

type Authorized = { claims?: Record<string, unknown>; principal?: string };
type Refused = { status: number; message: string; headers?: Record<string, string> };

/** What API Gateway's authorization of a route gives the function, or its refusal. */
async function callerOf(
  req: IncomingMessage,
  url: URL,
  body: Buffer,
  auth: "jwt" | "iam" | "none",
  issuer: LocalIssuer,
): Promise<Authorized | Refused> {
  if (auth === "none") return {};
  if (auth === "iam") {
    const signed = await verifySignature(
      { method: req.method ?? "GET", url, headers: headersOf(req), body },
      LOCAL_SERVICE_CREDENTIALS,
    );
    return "problem" in signed ? { status: 403, message: signed.problem } : signed;
  }
  const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
  const verified = token
    ? await verifyToken(token, async () => issuer.publicKey, issuer)
    : { problem: "no bearer token in the Authorization header" };
  if ("problem" in verified)
    return {
      status: 401,
      message: "Unauthorized",
      // As API Gateway writes it (its parameters space-separated, with an empty scope).
      headers: {
        "www-authenticate": `Bearer scope="" error="invalid_token" error_description="${verified.problem}"`,
      },
    };
  return verified;
}

function headersOf(req: IncomingMessage): Record<string, string> {
  return Object.fromEntries(
    Object.entries(req.headers).flatMap(([k, v]) =>
      v === undefined ? [] : [[k.toLowerCase(), Array.isArray(v) ? v.join(",") : v]],
    ),
  );
}

/** The query's parameters as API Gateway gives them: a repeated one's values joined by commas. */
function queryOf(url: URL): Record<string, string> {
  const names = [...new Set(url.searchParams.keys())];
  return Object.fromEntries(names.map((name) => [name, url.searchParams.getAll(name).join(",")]));
}

/** The HTTP API's payload (format 2.0) for a request, as API Gateway hands it to the function. */
function eventOf(
  req: IncomingMessage,
  url: URL,
  routeKey: string,
  body: Buffer,
  caller: Authorized,
  requestId: string,
): APIGatewayProxyEventV2WithJWTAuthorizer {
  const headers = headersOf(req);
  const { claims, principal } = caller;
  const now = new Date();
  return {
    version: "2.0",
    routeKey,
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    ...(url.search ? { queryStringParameters: queryOf(url) } : {}),
    headers,
    ...(body.length > 0 ? { body: body.toString("utf8") } : {}),
    isBase64Encoded: false,
    requestContext: {
      accountId: "123456789012",
      apiId: "local",
      domainName: "127.0.0.1",
      domainPrefix: "127",
      http: {
        method: req.method ?? "GET",
        path: url.pathname,
        protocol: "HTTP/1.1",
        sourceIp: req.socket.remoteAddress ?? "127.0.0.1",
        userAgent: req.headers["user-agent"] ?? "",
      },
      requestId,
      routeKey,
      stage: "$default",
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
      ...(claims
        ? { authorizer: { principalId: "", integrationLatency: 0, jwt: { claims, scopes: [] } } }
        : {}),
      ...(principal ? { authorizer: { iam: { userArn: principal } } } : {}),
    },
  } as unknown as APIGatewayProxyEventV2WithJWTAuthorizer;
}

async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_PAYLOAD_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}
