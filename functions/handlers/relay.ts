import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { Context, DynamoDBStreamEvent } from "aws-lambda";
import { registry as defaultRegistry, type EventRegistry, type Topic } from "../../schemas";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { envelopesFromStreamRecords } from "../adapters/dynamodb/stream";
import { EventBridgePublisher } from "../adapters/eventbridge/publisher";
import { parseEnv } from "../core/parse-env";
import { type RelayReport, relay } from "../core/relay";
import { containerAwsClient } from "./aws";
import { lambdaEntry } from "./lambda-entry";
import { type Observability, observability } from "./observe";
import { vaultOf } from "./vault";

/** The relay reads one `BUS_<TOPIC>` variable per topic present in the stack. */
export const RelayEnv = z
  .object({
    BUS_COMMANDS: z.optional(z.string().check(z.minLength(1))),
    BUS_EVENTS: z.optional(z.string().check(z.minLength(1))),
    BUS_AUDIT: z.optional(z.string().check(z.minLength(1))),
  })
  .check(
    z.refine((e) => e.BUS_COMMANDS || e.BUS_EVENTS || e.BUS_AUDIT, {
      message: "at least one BUS_<TOPIC> must be set",
    }),
  );
export type RelayEnv = z.output<typeof RelayEnv>;

export interface RelayHandlerOptions {
  readonly env?: Record<string, string | undefined>;
  readonly eventbridge?: AwsClient;
  /** The customer-keys table and KMS: what the relay opens sealed fields with (./vault). */
  readonly dynamodb?: AwsClient;
  readonly kms?: AwsClient;
  readonly registry?: EventRegistry;
  readonly observability?: Observability;
  readonly onReport?: (report: RelayReport) => void;
}

export type RelayHandler = (event: DynamoDBStreamEvent, context?: Context) => Promise<void>;

/**
 * The transactional outbox's publisher: events-table stream -> PutEvents on the topic's bus.
 * A failure after bounded in-call retries fails the invocation, so the event source mapping
 * retries (bisecting the batch) and finally parks the batch in its on-failure destination.
 */
export function createRelayHandler(options: RelayHandlerOptions = {}): RelayHandler {
  const env = parseEnv(RelayEnv, options.env ?? process.env, "relay");
  const { logger, metrics, tracer } = options.observability ?? observability("relay");
  const buses: Partial<Record<Topic, string>> = {
    commands: env.BUS_COMMANDS,
    events: env.BUS_EVENTS,
    audit: env.BUS_AUDIT,
  };
  const publisher = new EventBridgePublisher({
    client: tracer.capture(options.eventbridge ?? containerAwsClient()),
    buses,
  });
  const registry = options.registry ?? defaultRegistry;
  // The event store keeps personal fields sealed; the buses carry them opened.
  const vault = vaultOf(options.env ?? process.env, {
    dynamodb: tracer.capture(options.dynamodb ?? containerAwsClient()),
    kms: tracer.capture(options.kms ?? containerAwsClient()),
  });

  return async (event) => {
    const { envelopes, skipped } = envelopesFromStreamRecords(event.Records);
    if (skipped.length)
      logger.warn("stream records without an envelope were skipped", { count: skipped.length });
    try {
      const opened = vault ? await vault.openAll(envelopes) : envelopes;
      const report = await relay(opened, registry, publisher);
      metrics.addMetric("Relayed", MetricUnit.Count, report.published);
      metrics.addMetric("PutEventsCalls", MetricUnit.Count, report.calls);
      if (report.retriedEntries)
        metrics.addMetric("RelayRetriedEntries", MetricUnit.Count, report.retriedEntries);
      options.onReport?.(report);
    } finally {
      metrics.publishStoredMetrics();
    }
  };
}

export const { create, handler } = lambdaEntry(createRelayHandler);
