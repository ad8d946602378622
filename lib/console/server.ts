import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { OpsSource } from "../ops/views";
import { requestErrorPage } from "./page";
import { routeRequest } from "./routes";

export interface ConsoleOptions {
  /** Where the pages read the stack. */
  readonly source: OpsSource;
  /** The only address the console listens on. @default "127.0.0.1" */
  readonly host?: string;
  /** @default 0 (any free port) */
  readonly port?: number;
}

export interface RunningConsole {
  /** The overview page's address, e.g. `http://127.0.0.1:41234/`. */
  readonly url: string;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

const HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "content-security-policy":
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
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

async function respond(
  source: OpsSource,
  boundHost: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const method = req.method ?? "GET";
  const page = hostAllowed(boundHost, req.headers.host)
    ? await routeRequest(source, method, req.url ?? "/")
    : requestErrorPage(421, "This console answers only to a loopback address such as 127.0.0.1.");
  const body = Buffer.from(page.html, "utf8");
  res.writeHead(page.status, { ...HEADERS, "content-length": body.length });
  res.end(method === "HEAD" ? undefined : body);
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
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

/** Serves the operator console (overview, trace, run DAG, dead letters) over `source`. */
export async function startConsole(options: ConsoleOptions): Promise<RunningConsole> {
  const host = options.host ?? "127.0.0.1";
  const server = createServer((req, res) => {
    respond(options.source, host, req, res).catch((error: unknown) => {
      res.destroy(error instanceof Error ? error : new Error(String(error)));
    });
  });
  await listen(server, host, options.port ?? 0);
  const { port } = server.address() as AddressInfo;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return { url: `http://${urlHost}:${port}/`, close: () => closeServer(server) };
}
