import { Logger } from "@aws-lambda-powertools/logger";
import { Metrics } from "@aws-lambda-powertools/metrics";

/** Powertools logger and metrics for one function, built once per container. */
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
  return { logger, metrics };
}

export type Observability = ReturnType<typeof observability>;
