import { AsyncLocalStorage } from "node:async_hooks";
import {
  type Context,
  type ContextManager,
  context,
  propagation,
  ROOT_CONTEXT,
  trace,
} from "@opentelemetry/api";
import { setGlobalErrorHandler, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";

/**
 * The OpenTelemetry SDK of a function that exports its own spans: a tracer provider with a batch
 * processor and the OTLP/HTTP (JSON) exporter to `url`, a context manager over AsyncLocalStorage
 * (so a span started in a step is the parent of those its awaits start), and the W3C trace
 * context propagator. Loaded by ./telemetry.ts only when an OTLP endpoint is set, so a function
 * that exports nothing never evaluates it. Errors of an export go to `onError` (logged), never to
 * the handler.
 */

export interface ExportSetup {
  /** Where spans go: `<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces` or the traces endpoint. */
  readonly url: string;
  readonly service: string;
  /** How long one export may take before it is given up. */
  readonly timeoutMillis: number;
  readonly onError: (error: unknown) => void;
}

/** Registers the SDK globally; false when a provider was registered before (a Lambda layer's). */
export function registerExporter(setup: ExportSetup): boolean {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": setup.service }),
    spanProcessors: [
      new BatchSpanProcessor(
        new OTLPTraceExporter({ url: setup.url, timeoutMillis: setup.timeoutMillis }),
      ),
    ],
  });
  if (!trace.setGlobalTracerProvider(provider)) {
    void provider.shutdown().catch(setup.onError);
    return false;
  }
  setGlobalErrorHandler(setup.onError);
  context.setGlobalContextManager(new AsyncLocalContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  return true;
}

/** The active context follows async work, as `@opentelemetry/context-async-hooks` does. */
export class AsyncLocalContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(active, () => fn.call(thisArg, ...args));
  }

  bind<T>(active: Context, target: T): T {
    if (typeof target !== "function") return target;
    const manager = this;
    return function (this: unknown, ...args: unknown[]) {
      return manager.with(active, () => target.apply(this, args));
    } as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.storage.disable();
    return this;
  }
}
