import { Logger } from "@aws-lambda-powertools/logger";
import { Metrics } from "@aws-lambda-powertools/metrics";
import { registry } from "../../schemas";
import { liveRedactedKeys, RedactingLogFormatter } from "./log-redaction";
import { startTelemetry } from "./telemetry";
import { type Tracer, xrayTracer } from "./xray";

/**
 * What no log line shows: the registry's personal fields (an application's too, defined after
 * this module ran) and a message's content (./log-redaction).
 */
const logFormatter = new RedactingLogFormatter(liveRedactedKeys(registry));

/**
 * Powertools logger and metrics, the tracer of AWS calls (./xray.ts: X-Ray subsegments without
 * the X-Ray SDK) and OpenTelemetry's export of spans (./telemetry.ts), for one function, built
 * once per container. The tracer switches itself off outside Lambda (local runtime, tests), and
 * spans go nowhere unless an OTLP endpoint or a layer's tracer provider is there. The logger's
 * lines never carry payload text: its formatter redacts them (./log-redaction.ts).
 */
export function observability(service: string, group?: string) {
  const logger = new Logger({
    serviceName: service,
    logFormatter,
    persistentKeys: group ? { consumer_group: group } : {},
  });
  const metrics = new Metrics({
    namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? "AgentBus",
    serviceName: service,
    defaultDimensions: group ? { consumer_group: group } : {},
    logger,
  });
  const tracer: Tracer = xrayTracer();
  const telemetry = startTelemetry(service, (message, details) => logger.warn(message, details));
  return { logger, metrics, tracer, telemetry };
}

export type Observability = ReturnType<typeof observability>;
