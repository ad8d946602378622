import { Logger } from "@aws-lambda-powertools/logger";
import { Metrics } from "@aws-lambda-powertools/metrics";
import { type Tracer, xrayTracer } from "./xray";

/**
 * Powertools logger and metrics, and the tracer of AWS calls (./xray.ts: X-Ray subsegments
 * without the X-Ray SDK), for one function, built once per container. The tracer switches
 * itself off outside Lambda (local runtime, tests).
 */
export function observability(service: string, group?: string) {
  const logger = new Logger({
    serviceName: service,
    persistentKeys: group ? { consumer_group: group } : {},
  });
  const metrics = new Metrics({
    namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? "AgentBus",
    serviceName: service,
    defaultDimensions: group ? { consumer_group: group } : {},
    logger,
  });
  const tracer: Tracer = xrayTracer();
  return { logger, metrics, tracer };
}

export type Observability = ReturnType<typeof observability>;
