import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/** One POST the webhook received: its headers and its body (JSON). */
export interface ReceivedPush {
  readonly headers: IncomingHttpHeaders;
  readonly body: {
    task?: {
      id?: string;
      status?: { state?: string };
      metadata?: { agentbus?: { notification_id?: string } };
    };
  };
}

export interface TestWebhook {
  readonly url: string;
  readonly received: ReceivedPush[];
  /** The task states received, in order (what the POSTs' tasks said). */
  states(): string[];
  close(): Promise<void>;
}

/**
 * An A2A push notification receiver run by a test on 127.0.0.1, that keeps every POST it gets.
 * `answer(n)` gives the status of the n-th POST (1-based), 200 by default; `delayMs` holds each
 * answer back that long (a slow webhook).
 */
export async function startWebhook(
  options: { answer?: (n: number) => number; delayMs?: number } = {},
): Promise<TestWebhook> {
  const received: ReceivedPush[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({
        headers: request.headers,
        body: JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}"),
      });
      const status = options.answer?.(received.length) ?? 200;
      const reply = () => response.writeHead(status).end();
      if (options.delayMs) setTimeout(reply, options.delayMs).unref();
      else reply();
    });
  });
  await new Promise<void>((ready) => server.listen(0, "127.0.0.1", ready));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    states: () => received.map((r) => r.body.task?.status?.state ?? "(none)"),
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}
