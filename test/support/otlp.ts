import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * An OTLP/HTTP receiver in the test's own process: a node http server on 127.0.0.1 that keeps
 * every JSON export sent to `/v1/traces`, and reads the spans back with their attributes as plain
 * values.
 */

export interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values: OtlpValue[] };
}
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: OtlpValue }[];
  status?: { code?: number };
}
interface OtlpExport {
  resourceSpans: {
    resource: { attributes: { key: string; value: OtlpValue }[] };
    scopeSpans: { scope: { name: string }; schemaUrl?: string; spans: OtlpSpan[] }[];
  }[];
}

/** OTLP's span kinds, by number. */
export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;
/** OTLP's status codes. */
export const STATUS_CODE = { unset: 0, ok: 1, error: 2 } as const;

export interface OtlpReceiver {
  readonly server: Server;
  /** `http://127.0.0.1:<port>`: what OTEL_EXPORTER_OTLP_ENDPOINT names. */
  readonly endpoint: string;
  /** Every span received so far, with its service, its scope's schema URL and plain attributes. */
  received(): ReceivedSpan[];
  close(): Promise<void>;
}

export type ReceivedSpan = OtlpSpan & {
  service: unknown;
  schemaUrl: string | undefined;
  attrs: Record<string, unknown>;
};

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const exports: OtlpExport[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      if (request.url === "/v1/traces" && request.headers["content-type"] === "application/json")
        exports.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as OtlpExport);
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    server,
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received: () =>
      exports.flatMap((e) =>
        e.resourceSpans.flatMap((r) =>
          r.scopeSpans.flatMap((s) =>
            s.spans.map((span) => ({
              ...span,
              service: plain(r.resource.attributes)["service.name"],
              schemaUrl: s.schemaUrl,
              attrs: plain(span.attributes),
            })),
          ),
        ),
      ),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function plain(attributes: { key: string; value: OtlpValue }[]): Record<string, unknown> {
  const value = (v: OtlpValue): unknown =>
    v.arrayValue
      ? v.arrayValue.values.map(value)
      : (v.stringValue ?? (v.intValue === undefined ? v.doubleValue : Number(v.intValue)));
  return Object.fromEntries(attributes.map((a) => [a.key, value(a.value)]));
}
