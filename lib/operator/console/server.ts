import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { OpsActions } from "../actions";
import type { OpsSource } from "../views";
import { type ActionContext, answerPost, type PostAnswer } from "./actions";
import { FlashMessages } from "./flash";
import { MAX_FORM_BYTES } from "./form-data";
import { requestErrorPage } from "./page";
import { newFormToken } from "./post-guard";
import { type PageContext, routeRequest } from "./routes";

export interface ConsoleOptions {
  /** Where the pages read the stack. */
  readonly source: OpsSource;
  /**
   * What the console's forms do (cancel, reset, resolve, re-run, approve, reject, resolve a send,
   * redrive). @default none: the console only reads, and its pages have no forms
   */
  readonly actions?: OpsActions;
  /** @default 0 (any free port) */
  readonly port?: number;
}

export interface RunningConsole {
  /** The overview page's address, e.g. `http://127.0.0.1:41234/`. */
  readonly url: string;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

/** The only address the console listens on. */
const HOST = "127.0.0.1";

const HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "content-security-policy":
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  // same-origin, not no-referrer: a form's POST must carry the page's Origin to be accepted.
  "referrer-policy": "same-origin",
} as const;

const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host);

/**
 * A console bound to loopback answers only requests addressed to a loopback name, so a web page
 * whose own name resolves to 127.0.0.1 (DNS rebinding) cannot read it from a browser.
 */
export function hostAllowed(boundHost: string, hostHeader: string | undefined): boolean {
  if (!isLoopback(boundHost) || hostHeader === undefined) return true;
  const name = hostHeader.toLowerCase().replace(/:\d*$/, "");
  return isLoopback(name);
}

/** The request's body, or undefined once it is longer than `limit` bytes. */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
    });
    req.on("end", () =>
      resolve(size <= limit ? Buffer.concat(chunks).toString("utf8") : undefined),
    );
    req.on("error", reject);
  });
}

async function post(context: ActionContext, req: IncomingMessage): Promise<PostAnswer> {
  const body = await readBody(req, MAX_FORM_BYTES);
  if (body === undefined)
    return requestErrorPage(413, `A form of the console is at most ${MAX_FORM_BYTES} bytes.`);
  const header = (name: string) => {
    const value = req.headers[name];
    return Array.isArray(value) ? value.join(",") : value;
  };
  return answerPost(context, {
    path: new URL(req.url ?? "/", "http://console.invalid").pathname,
    host: header("host"),
    origin: header("origin"),
    contentType: header("content-type"),
    body,
  });
}

interface Served {
  readonly source: OpsSource;
  readonly pages: PageContext;
  readonly actions?: ActionContext;
}

async function respond(served: Served, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = req.method ?? "GET";
  let page: PostAnswer;
  if (!hostAllowed(HOST, req.headers.host))
    page = requestErrorPage(
      421,
      "This console answers only to a loopback address such as 127.0.0.1.",
    );
  else if (method === "POST" && served.actions) page = await post(served.actions, req);
  else page = await routeRequest(served.source, method, req.url ?? "/", served.pages);
  if ("location" in page) {
    res.writeHead(303, { ...HEADERS, location: page.location, "content-length": 0 });
    res.end();
    return;
  }
  const body = Buffer.from(page.html, "utf8");
  res.writeHead(page.status, { ...HEADERS, "content-length": body.length });
  res.end(method === "HEAD" ? undefined : body);
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, HOST, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    server.closeAllConnections();
  });
}

/**
 * Serves the operator console (overview, trace, run DAG, dead letters) over `source` on
 * 127.0.0.1; with `actions`, its pages have forms that act on the stack (checked for the
 * console's own address and its form token, made anew each time it starts).
 */
export async function startConsole(options: ConsoleOptions): Promise<RunningConsole> {
  const token = newFormToken();
  const flashes = new FlashMessages();
  const served: { -readonly [K in keyof Served]: Served[K] } = {
    source: options.source,
    pages: options.actions ? { forms: { token }, flashes } : {},
  };
  const server = createServer((req, res) => {
    respond(served, req, res).catch((error: unknown) => {
      res.destroy(error instanceof Error ? error : new Error(String(error)));
    });
  });
  await listen(server, options.port ?? 0);
  const { port } = server.address() as AddressInfo;
  const own = `${HOST}:${port}`;
  if (options.actions) served.actions = { actions: options.actions, flashes, own, token };
  return { url: `http://${own}/`, close: () => closeServer(server) };
}
