import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One answer of the stub: a status, headers and a body, as a service would send them. */
export interface StubAnswer {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body: string;
}

/** What the stub received: enough to tell which call it was and who sent it. */
export interface StubRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage["headers"];
  readonly body: string;
}

/**
 * An HTTP server on 127.0.0.1 that answers every request with what `answer` returns for it:
 * the faults moto cannot produce (throttling, 5xx) in each service's own error shape, and the
 * answers of a service moto does not emulate (Bedrock Runtime's Converse). It records every
 * request, so a test can count the attempts a client made.
 */
export class AwsFaultStub {
  readonly requests: StubRequest[] = [];
  private constructor(
    private readonly server: Server,
    readonly endpoint: string,
    private answer: (request: StubRequest) => StubAnswer,
  ) {}

  static async start(answer: (request: StubRequest) => StubAnswer): Promise<AwsFaultStub> {
    let stub: AwsFaultStub | undefined;
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const request: StubRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      stub?.requests.push(request);
      const reply = stub?.answer(request) ?? { status: 500, body: "" };
      res.writeHead(reply.status, {
        "x-amzn-requestid": `stub-${stub?.requests.length ?? 0}`,
        ...reply.headers,
      });
      res.end(reply.body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    stub = new AwsFaultStub(server, `http://127.0.0.1:${port}`, answer);
    return stub;
  }

  /** Answers every later request with `answer`, and forgets the requests seen so far. */
  answerWith(answer: (request: StubRequest) => StubAnswer): void {
    this.answer = answer;
    this.requests.length = 0;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
