import {
  type Attributes,
  context,
  defaultTextMapGetter,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { inSpan } from "../core/genai-spans";

/**
 * OpenTelemetry in a function: its spans exported over OTLP, and the span of each message a
 * consumer processes (the GenAI spans of model calls, agent steps and tool calls are made in the
 * core: functions/core/genai-spans.ts, children of it).
 *
 * Where spans go, in this order:
 * - a tracer provider registered before the handler loaded (the AWS Distro for OpenTelemetry
 *   Lambda layer, `AWS_LAMBDA_EXEC_WRAPPER=/opt/otel-instrument`): that one, left as it is;
 * - else, with `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (plus
 *   `/v1/traces`) set, the SDK exports to it over OTLP/HTTP (./telemetry-export.ts, loaded only
 *   then), unless `OTEL_SDK_DISABLED=true`. A Lambda bundle carries the SDK only when its stack
 *   exports to an OTLP endpoint (`agentbus:otlpEndpoint`): the bundling defines
 *   `process.env.AGENTBUS_OTLP_SDK` as "false" otherwise, and esbuild drops the import;
 * - else nowhere: every span is a no-op. That is the default locally and in tests, so nothing is
 *   sent anywhere unless an endpoint is set.
 * Spans are flushed at the end of each invocation (`flush`), before Lambda freezes the process;
 * an export that fails is logged and never fails the handler.
 */

export type TelemetryEnv = Readonly<Record<string, string | undefined>>;

export interface Telemetry {
  /** Resolves once the exporter (if any) is registered: awaited before the first span. */
  readonly ready: Promise<void>;
  /** Exports the spans ended so far; never rejects (a failed export is logged). */
  flush(): Promise<void>;
}

/** Where spans are exported to, by the OTLP exporter's variables; undefined: not exported. */
export function otlpTracesUrl(env: TelemetryEnv): string | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, "")}/v1/traces` : undefined;
}

/** How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, ms); short, as a handler waits. */
function exportTimeout(env: TelemetryEnv): number {
  const given = Number(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? env.OTEL_EXPORTER_OTLP_TIMEOUT);
  return Number.isFinite(given) && given > 0 ? given : 3000;
}

/**
 * The telemetry of a function named `service`, started once per container: the exporter is
 * loaded and registered when `env` names an OTLP endpoint. `warn` logs what goes wrong.
 */
export function startTelemetry(
  service: string,
  warn: (message: string, details: Record<string, unknown>) => void,
  env: TelemetryEnv = process.env,
): Telemetry {
  const onError = (error: unknown) =>
    warn("span export failed: spans of this invocation may be missing", {
      error: error instanceof Error ? { name: error.name, message: error.message } : error,
    });
  const url = otlpTracesUrl(env);
  // A bundle built without the SDK (lib/infra/constructs/bundling.ts: `AGENTBUS_OTLP_SDK`, fixed
  // at build time) leaves this import out, and exports only through a layer's provider.
  const exporter =
    process.env.AGENTBUS_OTLP_SDK !== "false" && url ? import("./telemetry-export") : undefined;
  const ready = exporter
    ? exporter
        .then(({ registerExporter }) => {
          registerExporter({
            url: url as string,
            service,
            timeoutMillis: exportTimeout(env),
            onError,
          });
        })
        .catch(onError)
    : Promise.resolve();
  return {
    ready,
    async flush() {
      await ready;
      await flushRegistered().catch(onError);
    },
  };
}

/** Flushes the registered tracer provider, ours or a layer's (a no-op provider has nothing). */
async function flushRegistered(): Promise<void> {
  const registered = trace.getTracerProvider() as {
    getDelegate?: () => unknown;
    forceFlush?: () => Promise<void>;
  };
  const provider = (registered.getDelegate?.() ?? registered) as { forceFlush?: () => unknown };
  if (typeof provider.forceFlush === "function") await provider.forceFlush();
}

/**
 * Whether spans go anywhere: a tracer provider was registered (ours or a layer's). Without one,
 * every span is a no-op, and a hop skips even reading the message's traceparent (./hop-spans.ts).
 */
export function tracerRegistered(): boolean {
  const provider = trace.getTracerProvider();
  return (
    !(provider instanceof ProxyTracerProvider) ||
    provider.getDelegateTracer("agentbus") !== undefined
  );
}

const propagator = new W3CTraceContextPropagator();

/**
 * The W3C `traceparent` a message carries from the span that sent it, if any: the one place the
 * envelope's field is read.
 */
export function traceParentOf(envelope: unknown): string | undefined {
  const value = (envelope as { traceparent?: unknown } | null | undefined)?.traceparent;
  return typeof value === "string" ? value : undefined;
}

/** The context whose span is the one `traceparent` names; the active context without one. */
export function parentContext(traceparent: string | undefined) {
  if (traceparent === undefined) return context.active();
  const extracted = propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter);
  return trace.getSpanContext(extracted) ? extracted : context.active();
}

/** The ids of a delivered message that its span and its log lines carry. */
export interface MessageIds {
  readonly event_id?: string;
  readonly event_type?: string;
  readonly correlation_id?: string;
  readonly causation_id?: string;
  readonly task_id?: string;
  readonly aggregate_id?: string;
  readonly aggregate_version?: number;
  /** The delivery's receive count: 1 on the first attempt. */
  readonly attempt: number;
}

/**
 * Processes one delivered message in a `process <event_type>` consumer span (messaging
 * conventions: `messaging.system` `aws_sqs`, `messaging.operation.type` `process`, the consumer
 * group as `messaging.destination.name`, the SQS message id, the correlation id as
 * `messaging.message.conversation_id`) with the message's ids as `agentbus.*` attributes; its
 * parent is the span its `traceparent` names, else the active one.
 */
export function inMessageSpan<T>(
  message: { readonly ids: MessageIds; readonly traceparent?: string },
  delivery: { readonly group: string; readonly messageId: string },
  work: () => Promise<T>,
): Promise<T> {
  const { ids } = message;
  const attributes: Attributes = {
    "messaging.system": "aws_sqs",
    "messaging.operation.type": "process",
    "messaging.operation.name": "process",
    "messaging.destination.name": delivery.group,
    "messaging.message.id": delivery.messageId,
    ...(ids.correlation_id ? { "messaging.message.conversation_id": ids.correlation_id } : {}),
    ...Object.fromEntries(
      Object.entries(ids)
        .filter(([, value]) => value !== undefined)
        .map(([key, value]) => [`agentbus.${key}`, value]),
    ),
  };
  const name = `process ${ids.event_type ?? "message"}`;
  return context.with(parentContext(message.traceparent), () =>
    inSpan(name, { kind: SpanKind.CONSUMER, attributes }, work),
  );
}
